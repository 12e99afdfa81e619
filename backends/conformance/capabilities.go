package conformance

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"hoist/agents/api"
	"hoist/backends"
	"hoist/backends/offers"
)

// volumes checks a backends.VolumeBackend on a running instance: create
// (idempotent on the id, tagged, owned) → describe until available → attach
// to the instance (a device path, or for pods a claim) → in use → detach
// (again: detached is success) → available → delete (twice) → gone; and, with
// Options.ExternalVolume, that a registered volume is not owned and that
// deleting it leaves it at the provider (it can be registered again).
func (k *kit) volumes(t *testing.T, vb backends.VolumeBackend, inst backends.Instance) {
	ctx, cancel := context.WithTimeout(t.Context(), k.opts.Timeout)
	defer cancel()
	region := inst.Region
	if region == "" {
		region = inst.Offer.Region
	}
	spec := backends.VolumeSpec{ID: fmt.Sprintf("confvol-%s-0", k.run), Name: "conformance", Region: region, SizeGB: 1, Tags: backends.CopyTags(k.tags)}
	k.vols = append(k.vols, spec.ID)
	v, err := vb.CreateVolume(ctx, spec)
	if err != nil {
		t.Fatalf("CreateVolume: %v", err)
	}
	if v.ID != spec.ID || v.ProviderID == "" || !v.Owned || !backends.MatchTags(v.Tags, spec.Tags) {
		t.Errorf("CreateVolume = %+v; want id %s, a provider id, owned, tags %v", v, spec.ID, spec.Tags)
	}
	again, err := vb.CreateVolume(ctx, spec)
	if err != nil || again.ProviderID != v.ProviderID {
		t.Errorf("CreateVolume with a reused id = %+v, %v; want provider id %s again", again, err, v.ProviderID)
	}
	k.waitVolume(t, vb, spec.ID, "available")
	k.listedVolume(t, vb, spec.ID, v.ProviderID, true)

	att, err := vb.AttachVolume(ctx, spec.ID, inst.ID)
	if err != nil {
		t.Fatalf("AttachVolume(%s, %s): %v", spec.ID, inst.ID, err)
	}
	if att.DevicePath == "" && att.Claim == "" {
		t.Errorf("AttachVolume(%s, %s): neither a device path nor a claim", spec.ID, inst.ID)
	}
	t.Logf("volume %s (%s) attached to %s at %s%s", spec.ID, v.ProviderID, inst.ID, att.DevicePath, att.Claim)
	k.waitVolume(t, vb, spec.ID, "in-use")
	for range 2 {
		retry(ctx, k.opts.Poll, func() error { return vb.DetachVolume(ctx, spec.ID, inst.ID, false) },
			func(err error) { t.Fatalf("DetachVolume(%s, %s): %v", spec.ID, inst.ID, err) })
	}
	k.waitVolume(t, vb, spec.ID, "available")

	if k.opts.ExternalVolume != nil {
		pid := k.opts.ExternalVolume(t, region, 1)
		var first string // the provider id the first registration reports
		for i := 1; i <= 2; i++ {
			rs := backends.VolumeSpec{ID: fmt.Sprintf("confvol-%s-%d", k.run, i), Name: "conformance-external", Region: region, ExternalID: pid, Tags: backends.CopyTags(k.tags)}
			k.vols = append(k.vols, rs.ID)
			rv, err := vb.RegisterVolume(ctx, rs)
			if err != nil {
				t.Fatalf("RegisterVolume(%s, external %s) (registration %d): %v", rs.ID, pid, i, err)
			}
			if first == "" {
				first = rv.ProviderID
			}
			if rv.ID != rs.ID || rv.ProviderID == "" || rv.ProviderID != first || rv.Owned {
				t.Errorf("RegisterVolume(external %s) = %+v; want id %s, a provider id (the same every time), not owned", pid, rv, rs.ID)
			}
			if d, err := vb.DescribeVolume(ctx, rs.ID); err != nil || d.Owned || d.ProviderID != rv.ProviderID {
				t.Errorf("DescribeVolume(registered %s) = %+v, %v", rs.ID, d, err)
			}
			if vols, err := vb.ListVolumes(ctx, k.tags); err != nil {
				t.Errorf("ListVolumes: %v", err)
			} else if i := slices.IndexFunc(vols, func(v backends.Volume) bool { return v.ProviderID == rv.ProviderID && v.Owned }); i >= 0 {
				t.Errorf("ListVolumes lists the registered volume %s as owned: %+v", pid, vols[i])
			}
			// Deleting a registered volume forgets it; the next round
			// registers it again, which proves it is still there.
			retry(ctx, k.opts.Poll, func() error { return vb.DeleteVolume(ctx, rs.ID) },
				func(err error) { t.Fatalf("DeleteVolume(registered %s): %v", rs.ID, err) })
			if _, err := vb.DescribeVolume(ctx, rs.ID); !errors.Is(err, backends.ErrNotFound) {
				t.Errorf("DescribeVolume(%s) after deleting the registration = %v, want ErrNotFound", rs.ID, err)
			}
		}
	}

	for range 2 {
		retry(ctx, k.opts.Poll, func() error { return vb.DeleteVolume(ctx, spec.ID) },
			func(err error) { t.Fatalf("DeleteVolume(%s): %v", spec.ID, err) })
	}
	if _, err := vb.DescribeVolume(ctx, spec.ID); !errors.Is(err, backends.ErrNotFound) {
		t.Errorf("DescribeVolume(%s) after DeleteVolume = %v, want ErrNotFound", spec.ID, err)
	}
	k.listedVolume(t, vb, spec.ID, v.ProviderID, false)
	if _, err := vb.DescribeVolume(ctx, "confvol-unknown-"+k.run); !errors.Is(err, backends.ErrNotFound) {
		t.Errorf("DescribeVolume(unknown) = %v, want ErrNotFound", err)
	}
}

// listedVolume checks what ListVolumes says of volume id (provider id
// pid): with the kit's tags it is listed, owned, once and with its
// provider id (want) or not at all, unless as deleting (!want); with
// another installation's tag it is never listed.
func (k *kit) listedVolume(t *testing.T, vb backends.VolumeBackend, id, pid string, want bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), k.opts.Timeout)
	defer cancel()
	vols, err := vb.ListVolumes(ctx, k.tags)
	if err != nil {
		t.Fatalf("ListVolumes(%v): %v", k.tags, err)
	}
	n := 0
	for _, v := range vols {
		if !backends.MatchTags(v.Tags, k.tags) {
			t.Errorf("ListVolumes(%v) returned %s with tags %v", k.tags, v.ID, v.Tags)
		}
		if v.ProviderID == pid && v.ID != id {
			t.Errorf("ListVolumes: volume %s listed as %q, want hoist id %s (its %s tag)", pid, v.ID, id, backends.TagVolume)
		}
		if v.ID != id {
			continue
		}
		switch {
		case want && (v.ProviderID != pid || !v.Owned):
			t.Errorf("ListVolumes: %+v; want provider id %s, owned", v, pid)
		case !want && v.Status != "deleting":
			t.Errorf("ListVolumes after DeleteVolume(%s): still listed, %+v", id, v)
		}
		n++
	}
	if want && n != 1 {
		t.Errorf("ListVolumes(%v): volume %s listed %d times, want once", k.tags, id, n)
	}
	other, err := vb.ListVolumes(ctx, map[string]string{backends.TagInstallation: "conformance-other-" + k.run})
	if err != nil {
		t.Fatalf("ListVolumes(another installation): %v", err)
	}
	for _, v := range other {
		if v.ID == id {
			t.Errorf("ListVolumes(another installation) lists %s", id)
		}
	}
}

// waitVolume describes a volume until its status is want.
func (k *kit) waitVolume(t *testing.T, vb backends.VolumeBackend, id, want string) backends.Volume {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), k.opts.Timeout)
	defer cancel()
	for {
		v, err := vb.DescribeVolume(ctx, id)
		if err != nil && backends.IsStalled(err) {
			t.Fatalf("DescribeVolume(%s): %v", id, err)
		}
		if err == nil && v.Status == want {
			return v
		}
		select {
		case <-ctx.Done():
			t.Fatalf("volume %s not %s after %s: %+v, %v", id, want, k.opts.Timeout, v, err)
		case <-k.after():
		}
	}
}

// spot creates the i-th instance from a spot offer, checks it is one,
// interrupts it through Options.Interrupt and checks that Describe reports
// it terminated and interrupted; Terminate then cleans it up.
func (k *kit) spot(t *testing.T, i int) {
	ctx := t.Context()
	spec := k.spec(t, i)
	q := offers.Query{SpotPolicy: offers.SpotPolicySpot}
	if spec.Offer.Instance != "" {
		q.InstanceTypes = []string{spec.Offer.Instance}
	}
	all, err := k.b.Offers(ctx, q)
	if err == nil && len(all) == 0 && len(q.InstanceTypes) > 0 {
		q.InstanceTypes = nil
		all, err = k.b.Offers(ctx, q)
	}
	if err != nil || len(all) == 0 {
		t.Fatalf("Options.Interrupt is set but Offers(spot_policy spot) = %d offers, %v", len(all), err)
	}
	for _, o := range all {
		if !o.Spot {
			t.Errorf("Offers(spot_policy spot) returned an on-demand offer: %+v", o)
		}
	}
	spec.Offer = all[0]
	k.ids = append(k.ids, spec.ID)
	if _, err := k.b.Create(ctx, spec); err != nil {
		t.Fatalf("Create(%s, spot %s): %v", spec.ID, spec.Offer.Instance, err)
	}
	inst := k.waitRunning(t, spec.ID)
	if !inst.Offer.Spot {
		t.Errorf("spot instance %s: Offer.Spot = false: %+v", spec.ID, inst.Offer)
	}
	if inst.Interrupted {
		t.Errorf("spot instance %s is interrupted before the interruption", spec.ID)
	}
	wctx, cancel := context.WithTimeout(ctx, k.opts.Timeout)
	defer cancel()
	var task *spotTask
	if k.b.Traits().Runtime == backends.RuntimeRunner && k.opts.TaskImage != "" {
		// A container cloud's instance is a reservation: what the
		// provider reclaims is the pod of a task.
		task = k.startSpotTask(wctx, t, inst)
		defer task.remove()
	}
	k.opts.Interrupt(t, inst)
	if task != nil {
		info, err := task.sc.WaitTask(wctx, task.id, api.TaskTerminated)
		if err != nil || info.TerminationReason != api.ReasonInterrupted {
			t.Errorf("the task of the reclaimed spot instance: %+v, %v; want terminated as %s", info, err, api.ReasonInterrupted)
		}
	}
	for {
		got, err := k.b.Describe(wctx, spec.ID)
		if err != nil {
			t.Fatalf("Describe(%s) after the interruption = %v; want it terminated and interrupted", spec.ID, err)
		}
		if got.Status == backends.StatusTerminated {
			if !got.Interrupted {
				t.Errorf("Describe(%s) after the interruption: terminated but Interrupted = false (%s)", spec.ID, got.Message)
			}
			break
		}
		select {
		case <-wctx.Done():
			t.Fatalf("%s not terminated after the interruption within %s: status %q: %s", spec.ID, k.opts.Timeout, got.Status, got.Message)
		case <-k.after():
		}
	}
	k.terminate(t, spec.ID)
}

// A spotTask is the task the kit runs on a container cloud's spot
// instance, through the instance's connection.
type spotTask struct {
	conn backends.Conn
	sc   *api.ShimClient
	id   string
}

// startSpotTask runs a task of Options.TaskImage on inst and waits until it
// runs.
func (k *kit) startSpotTask(ctx context.Context, t *testing.T, inst backends.Instance) *spotTask {
	t.Helper()
	conn, err := k.b.(backends.Connector).Connect(ctx, inst)
	if err != nil {
		t.Fatalf("Connect(%s): %v", inst.ID, err)
	}
	st := &spotTask{conn: conn, sc: api.NewShimClient(conn.ShimURL(), conn.HTTPClient()), id: "conf-spot-" + k.run}
	if _, err := st.sc.CreateTask(ctx, api.TaskSpec{ID: st.id, Image: k.opts.TaskImage}); err != nil {
		conn.Close()
		t.Fatalf("CreateTask on the spot instance: %v", err)
	}
	if info, err := st.sc.WaitTask(ctx, st.id, api.TaskRunning); err != nil || info.Status != api.TaskRunning {
		st.remove()
		t.Fatalf("the spot instance's task: %+v, %v; want it running", info, err)
	}
	return st
}

// remove removes the task and closes the connection.
func (st *spotTask) remove() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, _ = st.sc.TerminateTask(ctx, st.id, api.ReasonTerminatedByServer, "conformance cleanup", 0)
	_ = st.sc.RemoveTask(ctx, st.id)
	st.conn.Close()
}

// placement checks a backends.PlacementBackend: create a group (twice: the
// same group), create the i-th instance in it, deleting the group while the
// instance is in it waits (ErrNotYetTerminated), and once the instance is
// terminated the group deletes, twice.
func (k *kit) placement(t *testing.T, pb backends.PlacementBackend, i int) {
	ctx, cancel := context.WithTimeout(t.Context(), k.opts.Timeout)
	defer cancel()
	spec := k.spec(t, i)
	gs := backends.PlacementGroupSpec{ID: fmt.Sprintf("confpg-%s", k.run), Name: "conformance", Region: spec.Offer.Region, Tags: backends.CopyTags(k.tags)}
	k.pgs = append(k.pgs, gs.ID)
	g, err := pb.CreatePlacementGroup(ctx, gs)
	if err != nil {
		t.Fatalf("CreatePlacementGroup: %v", err)
	}
	if g.ID != gs.ID || g.ProviderID == "" {
		t.Errorf("CreatePlacementGroup = %+v; want id %s and a provider id", g, gs.ID)
	}
	again, err := pb.CreatePlacementGroup(ctx, gs)
	if err != nil || again.ProviderID != g.ProviderID {
		t.Errorf("CreatePlacementGroup with a reused id = %+v, %v; want provider id %s again", again, err, g.ProviderID)
	}
	k.listedGroup(t, pb, gs.ID, g.ProviderID, true)
	spec.PlacementGroup = gs.ID
	k.ids = append(k.ids, spec.ID)
	if _, err := k.b.Create(ctx, spec); err != nil {
		t.Fatalf("Create(%s in placement group %s): %v", spec.ID, gs.ID, err)
	}
	k.waitRunning(t, spec.ID)
	err = pb.DeletePlacementGroup(ctx, gs.ID)
	if !errors.Is(err, backends.ErrNotYetTerminated) || backends.KindOf(err) != backends.KindWait {
		t.Errorf("DeletePlacementGroup(%s) while instance %s is in it = %v; want a wait on ErrNotYetTerminated", gs.ID, spec.ID, err)
	}
	k.terminate(t, spec.ID)
	for range 2 {
		retry(ctx, k.opts.Poll, func() error { return pb.DeletePlacementGroup(ctx, gs.ID) },
			func(err error) { t.Fatalf("DeletePlacementGroup(%s): %v", gs.ID, err) })
	}
	k.listedGroup(t, pb, gs.ID, g.ProviderID, false)
}

// listedGroup checks that ListPlacementGroups with the kit's tags lists
// group id (provider id pid) once (want) or not at all (!want), and that
// with another installation's tag it does not.
func (k *kit) listedGroup(t *testing.T, pb backends.PlacementBackend, id, pid string, want bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), k.opts.Timeout)
	defer cancel()
	for _, tags := range []map[string]string{k.tags, {backends.TagInstallation: "conformance-other-" + k.run}} {
		gs, err := pb.ListPlacementGroups(ctx, tags)
		if err != nil {
			t.Fatalf("ListPlacementGroups(%v): %v", tags, err)
		}
		n := 0
		for _, g := range gs {
			if !backends.MatchTags(g.Tags, tags) {
				t.Errorf("ListPlacementGroups(%v) returned %s with tags %v", tags, g.ID, g.Tags)
			}
			if g.ID == id {
				n++
				if g.ProviderID != pid {
					t.Errorf("ListPlacementGroups: %+v; want provider id %s", g, pid)
				}
			}
		}
		if w := map[bool]int{true: 1}[want && tags[backends.TagInstallation] == k.tags[backends.TagInstallation]]; n != w {
			t.Errorf("ListPlacementGroups(%v): group %s listed %d times, want %d", tags, id, n, w)
		}
	}
}

// after returns a channel that fires after one poll interval.
func (k *kit) after() <-chan time.Time { return time.After(k.opts.Poll) }
