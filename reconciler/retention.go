package reconciler

import (
	"context"
	"time"

	"hoist/store"
	"hoist/store/blob"
)

// retentionLoop deletes events, and the logs of jobs that finished, once
// they are older than Config.Retention, and the artifacts of runs that
// finished longer than Config.ArtifactRetention ago; it runs at start and
// then every Config.RetentionInterval. A zero retention keeps everything.
func (c *Controller) retentionLoop(ctx context.Context) {
	if c.cfg.Retention <= 0 && (c.cfg.ArtifactRetention <= 0 || c.cfg.Artifacts == nil) {
		return
	}
	c.prune(ctx)
	every(ctx, c.cfg.RetentionInterval, c.prune)
}

// every calls fn, interval after its previous call ended (the first one
// interval from now), until ctx is done.
func every(ctx context.Context, interval time.Duration, fn func(context.Context)) {
	t := time.NewTimer(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			fn(ctx)
			t.Reset(interval)
		}
	}
}

// prune runs one retention pass.
func (c *Controller) prune(ctx context.Context) {
	c.pruneArtifacts(ctx)
	if c.cfg.Retention <= 0 {
		return
	}
	before := c.now().Add(-c.cfg.Retention)
	events, err := c.st.PruneEvents(ctx, before)
	if err != nil {
		c.log.Warn("prune events failed", "error", err)
	}
	logs, err := c.st.PruneLogs(ctx, before)
	if err != nil {
		c.log.Warn("prune logs failed", "error", err)
	}
	metrics, err := c.st.PruneMetrics(ctx, before)
	if err != nil {
		c.log.Warn("prune job metrics failed", "error", err)
	}
	if events > 0 || logs > 0 || metrics > 0 {
		c.log.Info("retention pruned", "events", events, "job_logs", logs, "job_metrics", metrics, "before", before)
	}
}

// pruneArtifacts deletes the artifacts of runs that finished more than
// Config.ArtifactRetention ago and after the previous pass's cutoff (all
// of them on the first pass).
func (c *Controller) pruneArtifacts(ctx context.Context) {
	if c.cfg.ArtifactRetention <= 0 || c.cfg.Artifacts == nil {
		return
	}
	before := c.now().Add(-c.cfg.ArtifactRetention)
	ids, err := c.st.FinishedRunIDs(ctx, c.cfg.Project, c.artifactsPrunedTo, before)
	if err != nil {
		c.log.Warn("prune artifacts failed", "error", err)
		return
	}
	for _, id := range ids {
		if err := c.cfg.Artifacts.DeletePrefix(ctx, blob.RunPrefix(c.project(), id)); err != nil {
			c.log.Warn("prune artifacts failed", "run_id", id, "error", err)
			return
		}
	}
	c.artifactsPrunedTo = before
	if len(ids) > 0 {
		c.log.Info("artifacts pruned", "runs", len(ids), "before", before)
	}
}

// project is the store project of the controller's rows.
func (c *Controller) project() string {
	if c.cfg.Project == "" {
		return store.DefaultProject
	}
	return c.cfg.Project
}
