package reconciler

import (
	"context"
	"time"
)

// retentionLoop deletes events, and the logs of jobs that finished, once
// they are older than Config.Retention; it runs at start and then every
// Config.RetentionInterval. A zero Retention keeps everything.
func (c *Controller) retentionLoop(ctx context.Context) {
	if c.cfg.Retention <= 0 {
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
