package reconciler

import (
	"context"
	"encoding/json"
	"io/fs"

	"hoist/reconciler/plan"
	"hoist/schema"
	"hoist/store"
)

// observeFor is observe with the desired resources as a hint: a stored spec
// whose hash equals the desired one is not read back (the bytes are the
// same), so planning an unchanged or one-file-changed revision reads only
// small columns.
func (c *Controller) observeFor(ctx context.Context, desired []schema.Resource) (plan.Observed, error) {
	state, err := c.st.ObservedState(ctx, c.cfg.Project)
	if err != nil {
		return plan.Observed{}, err
	}
	return c.buildObserved(ctx, state, desired)
}

// loadAndObserve loads the specs of fsys and queries the observed state at
// the same time (they are independent until the specs are compared).
func (c *Controller) loadAndObserve(ctx context.Context, fsys fs.FS) (*schema.Desired, plan.Observed, error) {
	type queried struct {
		state store.ObservedState
		err   error
	}
	ch := make(chan queried, 1)
	go func() {
		state, err := c.st.ObservedState(ctx, c.cfg.Project)
		ch <- queried{state, err}
	}()
	desired, lerr := c.load(ctx, fsys)
	q := <-ch
	if lerr != nil {
		return nil, plan.Observed{}, lerr
	}
	if q.err != nil {
		return nil, plan.Observed{}, q.err
	}
	obs, err := c.buildObserved(ctx, q.state, desired.Resources)
	return desired, obs, err
}

// buildObserved compares the observed state with the desired specs and
// reads back only the stored specs that differ.
func (c *Controller) buildObserved(ctx context.Context, state store.ObservedState, desired []schema.Resource) (plan.Observed, error) {
	type key struct{ kind, name string }
	want := make(map[key][]byte, len(desired))
	for _, d := range desired {
		want[key{string(d.Kind), d.Name}] = d.JSON
	}
	rs, latest := state.Resources, state.LatestRuns
	obs := plan.Observed{Resources: make([]plan.Current, 0, len(rs))}
	var needRes, needRun []string // ids whose spec must be read
	fillRes := map[int]string{}   // index in obs.Resources → resource id
	fillRun := map[int]string{}   // index in obs.Resources → run id
	for _, r := range rs {
		cur := plan.Current{
			Kind: schema.Kind(r.Kind), Name: r.Name, File: r.File,
			Status: r.Status, Suspended: r.Suspended,
		}
		read := false
		if cur.Kind.IsRun() {
			run, ok := latest[r.Name]
			if !ok {
				// Recorded but never submitted (a crash in between): plan
				// it as a create, or the run would never start.
				continue
			}
			cur.Status = run.Status
			cur.Finished = store.IsRunFinished(run.Status)
			if run.SpecHash != r.SpecHash {
				// What runs is the run's spec: a crash after recording a
				// changed spec but before replacing the run must not
				// make the change look applied.
				fillRun[len(obs.Resources)] = run.ID
				needRun = append(needRun, run.ID)
				read = true
			}
		}
		if !read {
			if b, ok := want[key{r.Kind, r.Name}]; ok && specHash(b) == r.SpecHash && cur.Kind != schema.KindVolume && cur.Kind != schema.KindGateway {
				cur.Spec = b
			} else {
				fillRes[len(obs.Resources)] = r.ID
				needRes = append(needRes, r.ID)
			}
		}
		obs.Resources = append(obs.Resources, cur)
	}
	resSpecs, err := c.st.ResourceSpecs(ctx, needRes)
	if err != nil {
		return plan.Observed{}, err
	}
	runSpecs, err := c.st.RunSpecs(ctx, needRun)
	if err != nil {
		return plan.Observed{}, err
	}
	for i, id := range fillRes {
		obs.Resources[i].Spec = resSpecs[id]
	}
	for i, id := range fillRun {
		obs.Resources[i].Spec = runSpecs[id]
	}
	for i := range obs.Resources {
		cur := &obs.Resources[i]
		if cur.Kind == schema.KindVolume || cur.Kind == schema.KindGateway {
			cur.Prune = pruneOptIn(cur.Spec) // only their deletes need it
		}
	}
	if err := c.priceCurrent(ctx, obs.Resources); err != nil {
		return plan.Observed{}, err
	}
	return obs, nil
}

// pruneOptIn reports whether a volume or gateway spec opted in to being
// deleted when its spec leaves Git (`hoist: {prune: true}`).
func pruneOptIn(spec []byte) bool {
	var v struct {
		Hoist struct {
			Prune bool `json:"prune"`
		} `json:"hoist"`
	}
	return json.Unmarshal(spec, &v) == nil && v.Hoist.Prune
}
