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
	for {
		c.prune(ctx)
		t := time.NewTimer(c.cfg.RetentionInterval)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
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
	if events > 0 || logs > 0 {
		c.log.Info("retention pruned", "events", events, "job_logs", logs, "before", before)
	}
}
