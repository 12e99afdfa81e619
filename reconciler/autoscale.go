package reconciler

import (
	"math"
	"time"

	"hoist/schema"
	"hoist/store"
)

// scaleInterval is how often the run worker looks again at the traffic of a
// service that scales.
const scaleInterval = 5 * time.Second

// scaleState is what the autoscaler remembers of one service run (dstack
// keeps the desired replica count with the run and takes the time of the
// last scaling from its replicas; hoist keeps both in memory, next to the
// proxy's meter that feeds it).
type scaleState struct {
	// init is set once desired was first taken from the replicas alive.
	init bool
	// key is the run's project and name: a new run of the service (a
	// rolling deployment) starts from the count its older run scaled to.
	key string
	// desired is the replica count wanted now, within the range.
	desired int
	// changedAt is when desired last changed (dstack's last_scaled_at).
	changedAt time.Time
	// woken is set by WakeService until the run worker saw it.
	woken bool
}

// scaleFor returns run id's state, creating it; svcMu is held.
func (c *Controller) scaleFor(runID string) *scaleState {
	st, ok := c.scales[runID]
	if !ok {
		st = &scaleState{}
		c.scales[runID] = st
	}
	return st
}

// forgetScale drops a finished run's autoscaler state.
func (c *Controller) forgetScale(runID string) {
	c.svcMu.Lock()
	delete(c.scales, runID)
	c.svcMu.Unlock()
}

// minReplicas is the low end of a service's `replicas` (1 when unset).
func (s runSpec) minReplicas() int {
	if s.Replicas != nil && s.Replicas.Min != nil {
		return int(*s.Replicas.Min)
	}
	return 1
}

// maxReplicas is the high end of a service's `replicas` (its low end when
// unset).
func (s runSpec) maxReplicas() int {
	if s.Replicas != nil && s.Replicas.Max != nil {
		return max(int(*s.Replicas.Max), s.minReplicas())
	}
	return s.minReplicas()
}

// rpsWindow is the window a service's requests per second are averaged
// over: its `scaling.window`, or dstack's default of 60 s.
func (s runSpec) rpsWindow() time.Duration {
	if s.Scaling != nil && s.Scaling.Window > 0 {
		return time.Duration(s.Scaling.Window) * time.Second
	}
	return time.Duration(schema.DefaultScalingWindow) * time.Second
}

// scales reports whether the service's replica count follows its traffic.
func (s runSpec) scales() bool {
	return s.Scaling != nil && s.maxReplicas() > s.minReplicas()
}

// desiredReplicas returns how many replicas a service run should have now
// and when to look again (0: only on a change). A service without
// `scaling` keeps replicas.min. One with `scaling: {metric: rps}` follows
// dstack's RPSAutoscaler (src/dstack/_internal/server/services/services/autoscalers.py):
// desired = ceil(rps / target) within [min, max], where rps is the
// proxy's rate over `window`; a rise waits until scale_up_delay has passed
// since the last change (none from zero replicas), a fall until
// scale_down_delay has. The last replica of a `min: 0` service goes only
// once no request came for scale_down_delay; WakeService brings one back
// at once. alive is the number of replicas up now, the starting point
// after a restart of the server.
func (c *Controller) desiredReplicas(run *store.Run, spec runSpec, alive int) (int, time.Duration) {
	lo, hi := spec.minReplicas(), spec.maxReplicas()
	if !spec.scales() {
		return lo, 0
	}
	now := c.now()
	c.svcMu.Lock()
	defer c.svcMu.Unlock()
	st := c.scaleFor(run.ID)
	if !st.init {
		st.init, st.changedAt, st.key = true, now, run.Project+"/"+run.Name
		if !st.woken {
			st.desired = alive
			for id, o := range c.scales {
				if id != run.ID && o.init && o.key == st.key {
					st.desired = max(st.desired, o.desired)
				}
			}
		}
	}
	st.woken = false
	cur := min(max(st.desired, lo), hi)
	want := lo
	rps, last, measured := c.serviceTraffic(run.Project, run.Name, spec.rpsWindow())
	if measured && spec.Scaling.Target > 0 {
		want = min(max(int(math.Ceil(rps/spec.Scaling.Target)), lo), hi)
	}
	up := time.Duration(spec.Scaling.ScaleUpDelay) * time.Second
	down := time.Duration(spec.Scaling.ScaleDownDelay) * time.Second
	switch {
	case want > cur && cur > 0 && now.Sub(st.changedAt) < up:
		want = cur
	case want < cur && now.Sub(st.changedAt) < down:
		want = cur
	case want == 0 && cur > 0 && now.Sub(last) < down:
		// Requests came within scale_down_delay: keep the last replica.
		want = 1
	}
	if want != cur {
		c.log.Info("service scaled", "run", run.Name, "from", cur, "to", want, "rps", rps)
		st.changedAt = now
	}
	st.desired = want
	return want, scaleInterval
}
