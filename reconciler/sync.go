package reconciler

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"time"

	"hoist/reconciler/plan"
	"hoist/reconciler/source"
	"hoist/schema"
	"hoist/store"
)

// Sync results reported to the Observer.
const (
	resultSynced    = "synced"
	resultInvalid   = "invalid"
	resultHeld      = "held"
	resultError     = "error"
	resultUnchanged = "unchanged"
)

// RequestSync asks for a sync of the newest revision (webhooks, "sync
// now"), re-planning it even if it was handled already, and returns the
// request's number for WaitSynced; it never blocks. Requests coalesce: all
// those made before a sync begins are handled by it, and those made while
// it runs by exactly one more.
func (c *Controller) RequestSync() uint64 { return c.reqs.request(true) }

// WaitSynced blocks until request n (from RequestSync) was handled by a
// sync that began after it, and returns that sync's error, or ctx's.
func (c *Controller) WaitSynced(ctx context.Context, n uint64) error { return c.reqs.wait(ctx, n) }

func (c *Controller) requestSync(force bool) { c.reqs.request(force) }

// syncLoop runs the revision pipeline at start, whenever the source says
// something may have changed, and whenever a sync is requested.
func (c *Controller) syncLoop(ctx context.Context) {
	c.reqs.run(ctx, c.src.Changes(), c.runSync)
}

func (c *Controller) runSync(ctx context.Context, force bool) error {
	start := c.now()
	result, err := c.syncOnce(ctx, force)
	err = c.diskFull(err)
	if err != nil && ctx.Err() == nil {
		c.syncErr.Store(err.Error())
	} else if err == nil {
		c.syncErr.Store("")
	}
	if err != nil {
		result = resultError
		if ctx.Err() == nil {
			c.log.Warn("sync failed", "error", err)
		}
	}
	c.obs.Synced(result, c.now().Sub(start))
	return err
}

// syncOnce runs the revision pipeline once.
func (c *Controller) syncOnce(ctx context.Context, force bool) (string, error) {
	// A revision's new runs need room in the data directory: none is
	// taken while it is short (the status says why); running jobs go on.
	if err := c.checkDiskSpace(); err != nil {
		return "", err
	}
	unlock, ok, err := c.st.TrySyncLock(ctx, c.cfg.Project)
	if err != nil {
		return "", err
	}
	if !ok {
		return resultUnchanged, nil // another server is syncing
	}
	defer unlock()
	rev, err := c.src.Latest(ctx)
	if err != nil {
		return "", fmt.Errorf("resolve latest revision: %w", err)
	}
	st, err := c.st.GetSyncState(ctx, c.cfg.Project)
	if err != nil {
		return "", err
	}
	if st.Suspended {
		if st.LatestSHA != rev.ID {
			st.LatestSHA = rev.ID
			if err := c.st.UpdateSyncState(ctx, &st); err != nil {
				return "", err
			}
		}
		return resultUnchanged, nil
	}
	if !force && rev.ID == st.LatestSHA && (st.Status == store.SyncInvalid || rev.ID == st.AppliedSHA) {
		return resultUnchanged, nil
	}
	c.branch.Store(rev.Branch)
	log := c.log.With("revision", short(rev.ID))
	snap, err := c.src.Checkout(ctx, rev)
	if err != nil {
		return "", fmt.Errorf("checkout %s: %w", short(rev.ID), err)
	}
	defer snap.Close()
	desired, lerr := c.load(ctx, snap.FS)
	var transient *transientLoadError
	if lerr != nil && (ctx.Err() != nil || errors.As(lerr, &transient)) {
		// Shutting down, or a provider repository could not be fetched:
		// no verdict on the revision; the sync is tried again.
		return "", lerr
	}
	rec := store.Revision{
		Project: c.cfg.Project, SHA: rev.ID, SourceID: c.src.Describe(), Author: rev.Author, Message: rev.Message,
		CommittedAt: rev.Time, Valid: lerr == nil,
	}
	var errs []string
	if lerr != nil {
		errs = errorLines(lerr)
		rec.Errors = errs
	} else {
		rec.Warnings = c.advise(desired)
	}
	if err := c.st.RecordRevision(ctx, rec); err != nil {
		return "", err
	}
	if lerr != nil {
		log.Info("revision rejected", "errors", len(errs))
		if st.LatestSHA != rev.ID || st.Status != store.SyncInvalid {
			c.event(ctx, "revision", short(rev.ID), rev.ID, "rejected", rev.ID,
				fmt.Sprintf("revision rejected with %d errors; %s stays applied", len(errs), orNone(short(st.AppliedSHA))))
		}
		st.LatestSHA, st.Status, st.Errors = rev.ID, store.SyncInvalid, errs
		st.Held, st.HeldReasons = false, nil
		return resultInvalid, c.st.UpdateSyncState(ctx, &st)
	}
	if st.LatestSHA != rev.ID || st.Status != store.SyncSyncing {
		st.LatestSHA, st.Status, st.Errors = rev.ID, store.SyncSyncing, nil
		st.Held, st.HeldReasons = false, nil
		if err := c.st.UpdateSyncState(ctx, &st); err != nil {
			return "", err
		}
	}
	obs, err := c.observeFor(ctx, desired.Resources)
	if err != nil {
		return "", err
	}
	p := plan.Compute(desired.Resources, obs, c.now(), c.planOptions(ctx, c.isConfirmed(ctx, rev.ID)))
	c.recordPlan(ctx, rev.ID, p)
	if p.Held {
		log.Info("plan held", "reason", p.HoldReason)
		if !st.Held {
			c.event(ctx, "revision", short(rev.ID), rev.ID, "held", rev.ID, p.HoldReason)
		}
		st.Held, st.HeldReasons = true, []string{p.HoldReason}
		return resultHeld, c.st.UpdateSyncState(ctx, &st)
	}
	if err := c.apply(ctx, rev, p); err != nil {
		return "", err
	}
	if st.AppliedSHA != rev.ID {
		c.event(ctx, "revision", short(rev.ID), rev.ID, "applied", rev.ID, summarize(p))
	}
	st.AppliedSHA, st.Status, st.Errors, st.LastSyncedAt = rev.ID, store.SyncSynced, nil, c.now().UTC()
	st.Held, st.HeldReasons = false, nil
	for _, s := range p.Steps {
		if s.Held {
			st.Held, st.HeldReasons = true, append(st.HeldReasons, fmt.Sprintf("%s %s: %s", s.Kind, s.Name, s.Reason))
		}
	}
	if err := c.st.UpdateSyncState(ctx, &st); err != nil {
		return "", err
	}
	log.Info("revision applied", "creates", p.Count(plan.Create), "updates", p.Count(plan.Update),
		"replaces", p.Count(plan.Replace), "deletes", p.Count(plan.Delete))
	return resultSynced, nil
}

// recordPlan keeps the plan a revision produced with the revision, for its
// history page; failures are logged, never fatal.
func (c *Controller) recordPlan(ctx context.Context, sha string, p plan.Plan) {
	b, err := json.Marshal(p)
	if err == nil {
		err = c.st.SetRevisionPlan(ctx, c.cfg.Project, sha, b)
	}
	if err != nil {
		c.log.Warn("record plan failed", "revision", short(sha), "error", err)
	}
}

// Confirm lifts the holds of the plan of revision sha (mass deletion,
// budget, deletes of volumes and gateways) and syncs. It does not lift the
// budget at provisioning: instances past it are still not created.
func (c *Controller) Confirm(ctx context.Context, sha string) error {
	// Stored, so whichever server syncs next sees the confirmation.
	if err := c.st.ConfirmRevision(ctx, c.cfg.Project, sha); err != nil {
		return err
	}
	c.event(ctx, "revision", short(sha), sha, "confirmed", sha, "held changes confirmed")
	return c.WaitSynced(ctx, c.RequestSync())
}

func (c *Controller) isConfirmed(ctx context.Context, sha string) bool {
	ok, err := c.st.RevisionConfirmed(ctx, c.cfg.Project, sha)
	if err != nil {
		c.log.Warn("read confirmation failed", "revision", short(sha), "error", err)
	}
	return ok
}

// PlanFS plans the specs in fsys against the current state without applying
// anything: `hoist plan`, POST /api/v1/plan and pull-request previews. A
// load error is returned as schema.Errors.
func (c *Controller) PlanFS(ctx context.Context, fsys fs.FS) (plan.Plan, error) {
	desired, obs, err := c.loadAndObserve(ctx, fsys)
	if err != nil {
		return plan.Plan{}, err
	}
	p := plan.Compute(desired.Resources, obs, c.now(), c.planOptions(ctx, false))
	p.Warnings = c.advise(desired)
	return p, nil
}

// PlanRevision plans an arbitrary revision of the source (a pull request's
// head) against the current state.
func (c *Controller) PlanRevision(ctx context.Context, rev source.Revision) (plan.Plan, error) {
	snap, err := c.src.Checkout(ctx, rev)
	if err != nil {
		return plan.Plan{}, err
	}
	defer snap.Close()
	return c.PlanFS(ctx, snap.FS)
}

// load loads and validates the specs of fsys within the configured
// LoadTimeout, then applies the controller's checks to every resource; the
// error is schema.Errors when any spec is refused (a revision cut short by
// the deadline is refused, naming it). When ctx itself ends, its error is
// returned instead: nothing was decided about the revision.
func (c *Controller) load(ctx context.Context, fsys fs.FS) (*schema.Desired, error) {
	lctx, cancel := context.WithTimeout(ctx, c.cfg.LoadTimeout)
	defer cancel()
	desired, err := schema.LoadContext(lctx, fsys)
	if err != nil && ctx.Err() != nil {
		return nil, ctx.Err()
	}
	if err != nil {
		return desired, err
	}
	errs, err := c.resolveWorkflows(ctx, fsys, desired)
	if err != nil {
		return nil, &transientLoadError{err: err}
	}
	errs = append(errs, c.checkGateways(desired)...)
	for i := range desired.Resources {
		for _, check := range c.chk {
			errs = append(errs, check(&desired.Resources[i])...)
		}
	}
	if len(errs) > 0 {
		errs.Sort()
		return nil, errs
	}
	return desired, nil
}

// advise applies the controller's advisories to every resource of a valid
// revision and returns their findings as positioned lines.
func (c *Controller) advise(desired *schema.Desired) []string {
	var es schema.Errors
	for i := range desired.Resources {
		for _, a := range c.adv {
			es = append(es, a(&desired.Resources[i])...)
		}
	}
	if len(es) == 0 {
		return nil
	}
	es.Sort()
	return errorLines(es)
}

// SyncStatus is what /api/v1/sync reports.
type SyncStatus struct {
	// Status is synced, syncing or invalid.
	Status string `json:"status"`
	// Revision is the applied revision.
	Revision string `json:"revision"`
	// LatestRevision is the newest revision seen.
	LatestRevision string `json:"latest_revision"`
	// Errors are the rejected revision's errors as path:line:col lines.
	Errors []string `json:"errors"`
	// Held reports that the latest revision's plan, or some of its steps,
	// waits for a user's confirmation (Confirm).
	Held bool `json:"held"`
	// HeldReasons say what is held and why, one line each.
	HeldReasons []string `json:"held_reasons"`
	// Suspended reports that auto-sync is suspended.
	Suspended bool `json:"suspended"`
	// Source describes the repository, branch and path.
	Source string `json:"source"`
	// Branch is the tracked branch as last resolved.
	Branch string `json:"branch,omitempty"`
	// LastSyncedAt is when a revision was last applied.
	LastSyncedAt time.Time `json:"last_synced_at,omitzero"`
	// Error is why the last sync attempt failed (e.g. a DiskFullError);
	// "" once one succeeds.
	Error string `json:"error,omitempty"`
}

// Status returns the sync status.
func (c *Controller) Status(ctx context.Context) (SyncStatus, error) {
	st, err := c.st.GetSyncState(ctx, c.cfg.Project)
	if err != nil {
		return SyncStatus{}, err
	}
	errs := st.Errors
	if errs == nil {
		errs = []string{}
	}
	return SyncStatus{
		Status: st.Status, Revision: st.AppliedSHA, LatestRevision: st.LatestSHA, Errors: errs,
		Held: st.Held, HeldReasons: st.HeldReasons,
		Suspended: st.Suspended, Source: c.src.Describe(), LastSyncedAt: st.LastSyncedAt, Branch: c.branch.Load().(string),
		Error: c.syncErr.Load().(string),
	}, nil
}

// SetSuspended suspends or resumes auto-sync globally.
func (c *Controller) SetSuspended(ctx context.Context, suspended bool) error {
	st, err := c.st.GetSyncState(ctx, c.cfg.Project)
	if err != nil {
		return err
	}
	st.Suspended = suspended
	if err := c.st.UpdateSyncState(ctx, &st); err != nil {
		return err
	}
	what := "resumed"
	if suspended {
		what = "suspended"
	}
	c.event(ctx, "sync", "sync", "", what, st.AppliedSHA, "auto-sync "+what)
	if !suspended {
		c.requestSync(true)
	}
	return nil
}

// maxErrorLines caps the errors kept with a rejected revision (and shown
// by /api/v1/sync); `hoist validate` lists them all.
const maxErrorLines = 200

func errorLines(err error) []string {
	var es schema.Errors
	if errors.As(err, &es) {
		out := make([]string, 0, min(len(es), maxErrorLines+1))
		for i, e := range es {
			if i == maxErrorLines {
				out = append(out, fmt.Sprintf("… and %d more errors (`hoist validate` lists them all)", len(es)-i))
				break
			}
			out = append(out, e.Error())
		}
		return out
	}
	return []string{err.Error()}
}

func summarize(p plan.Plan) string {
	return fmt.Sprintf("%d created, %d updated, %d replaced, %d deleted, %d unchanged",
		p.Count(plan.Create), p.Count(plan.Update), p.Count(plan.Replace), p.Count(plan.Delete), p.Count(plan.Noop))
}

// short is source.ShortID, the one short form of a revision.
func short(sha string) string { return source.ShortID(sha) }

func orNone(s string) string {
	if s == "" {
		return "nothing"
	}
	return s
}

// ErrNotSuspended is returned by ApplyRevision while auto-sync is on: an
// older revision would be replaced by the newest one at once.
var ErrNotSuspended = errors.New("re-applying an older revision needs auto-sync suspended")

// ApplyRevision applies revision sha of the source (usually an older one)
// while auto-sync is suspended. The revision must be valid.
func (c *Controller) ApplyRevision(ctx context.Context, sha string) error {
	st, err := c.st.GetSyncState(ctx, c.cfg.Project)
	if err != nil {
		return err
	}
	if !st.Suspended {
		return ErrNotSuspended
	}
	snap, err := c.src.CheckoutAt(ctx, sha)
	if err != nil {
		return fmt.Errorf("checkout %s: %w", short(sha), err)
	}
	defer snap.Close()
	desired, err := c.load(ctx, snap.FS)
	if err != nil {
		return fmt.Errorf("revision %s is invalid: %w", short(sha), err)
	}
	obs, err := c.observeFor(ctx, desired.Resources)
	if err != nil {
		return err
	}
	p := plan.Compute(desired.Resources, obs, c.now(), c.planOptions(ctx, true))
	if err := c.apply(ctx, snap.Revision, p); err != nil {
		return err
	}
	c.event(ctx, "revision", short(sha), sha, "applied", sha, "re-applied by user while auto-sync is suspended: "+summarize(p))
	st.AppliedSHA, st.Status, st.Errors, st.LastSyncedAt = sha, store.SyncSynced, nil, c.now().UTC()
	st.Held, st.HeldReasons = false, nil
	return c.st.UpdateSyncState(ctx, &st)
}

// transientLoadError is a revision's load that failed for a reason other
// than its specs (a provider repository that could not be fetched): the
// revision is neither applied nor rejected.
type transientLoadError struct{ err error }

func (e *transientLoadError) Error() string { return e.err.Error() }
func (e *transientLoadError) Unwrap() error { return e.err }
