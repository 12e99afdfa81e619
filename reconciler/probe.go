package reconciler

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"time"

	"hoist/schema"
	"hoist/store"
)

// probeReplicas runs one round of a service's probes against its running
// replicas (dstack's ProbeConfig in src/dstack/_internal/core/models/configurations.py: http probes with url, method, headers, body,
// timeout, interval, ready_after). It reports whether every replica has
// passed each probe ready_after times in a row, and otherwise when to look
// again. A service without probes is ready once running. Each replica's
// counts are also kept in memory for the service proxy's routing (see
// replicaReady): a replica failing a probe is taken out, and put back once
// it passed ready_after times in a row again.
func (c *Controller) probeReplicas(ctx context.Context, spec runSpec, latest []store.Job) (bool, time.Duration) {
	if len(spec.Probes) == 0 {
		return true, 0
	}
	interval := time.Duration(spec.Probes[0].Interval) * time.Second
	ready, waiting := true, false
	for _, j := range latest {
		if j.Status != store.JobRunning {
			ready, waiting = false, true
			continue
		}
		var rd runtimeData
		if json.Unmarshal(j.RuntimeData, &rd) != nil || rd.ServiceAddr == "" {
			ready, waiting = false, true
			continue
		}
		_, conn, err := c.shimFor(ctx, j.InstanceID)
		if err != nil {
			ready, waiting = false, true
			continue
		}
		passes := make([]int, len(spec.Probes))
		for i, p := range spec.Probes {
			ok := probeOnce(ctx, conn.HTTPClient(), rd.ServiceAddr, p.Method, p.URL, p.Body, p.Headers, time.Duration(p.Timeout)*time.Second)
			// The count lives in the store: whichever server probes next
			// continues it.
			n, err := c.st.RecordProbe(ctx, j.ID, i, ok)
			if err != nil {
				c.log.Warn("record probe failed", "job", j.JobName, "error", err)
				n, waiting = 0, true
			}
			passes[i] = n
			if n < max(p.ReadyAfter, 1) {
				ready = false
			}
			if d := time.Duration(p.Interval) * time.Second; d > 0 && d < interval {
				interval = d
			}
		}
		c.setPasses(j.ID, passes)
	}
	if interval <= 0 || (waiting && interval > time.Second) {
		interval = time.Second
	}
	return ready, interval
}

// setPasses keeps a job's latest probe counts for routing.
func (c *Controller) setPasses(jobID string, passes []int) {
	c.svcMu.Lock()
	c.passes[jobID] = passes
	c.svcMu.Unlock()
}

// forgetPasses drops a finished job's probe counts.
func (c *Controller) forgetPasses(jobID string) {
	c.svcMu.Lock()
	delete(c.passes, jobID)
	c.svcMu.Unlock()
}

// replicaReady reports whether a running replica receives traffic: it has
// no probes, or this server last saw it pass each probe ready_after times
// in a row.
func (c *Controller) replicaReady(jobID string, probes []schema.Probe) bool {
	if len(probes) == 0 {
		return true
	}
	c.svcMu.Lock()
	passes := c.passes[jobID]
	c.svcMu.Unlock()
	if len(passes) != len(probes) {
		return false
	}
	for i, p := range probes {
		if passes[i] < max(p.ReadyAfter, 1) {
			return false
		}
	}
	return true
}

// probeOnce sends one HTTP probe; a 2xx answer passes.
func probeOnce(ctx context.Context, hc *http.Client, addr, method, path, body string, headers []schema.HTTPHeader, timeout time.Duration) bool {
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	if method == "" {
		method = http.MethodGet
	}
	if !strings.HasPrefix(path, "/") {
		path = "/" + path
	}
	pctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(pctx, strings.ToUpper(method), "http://"+addr+path, strings.NewReader(body))
	if err != nil {
		return false
	}
	for _, h := range headers {
		req.Header.Set(h.Name, h.Value)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return false
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
	resp.Body.Close()
	return resp.StatusCode >= 200 && resp.StatusCode < 300
}
