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
// again. A service without probes is ready once running.
func (c *Controller) probeReplicas(ctx context.Context, spec runSpec, latest []store.Job) (bool, time.Duration) {
	if len(spec.Probes) == 0 {
		return true, 0
	}
	interval := time.Duration(spec.Probes[0].Interval) * time.Second
	ready := true
	for _, j := range latest {
		if j.Status != store.JobRunning {
			return false, time.Second
		}
		var rd runtimeData
		if json.Unmarshal(j.RuntimeData, &rd) != nil || rd.ServiceAddr == "" {
			return false, time.Second
		}
		_, conn, err := c.shimFor(ctx, j.InstanceID)
		if err != nil {
			return false, time.Second
		}
		for i, p := range spec.Probes {
			ok := probeOnce(ctx, conn.HTTPClient(), rd.ServiceAddr, p.Method, p.URL, p.Body, p.Headers, time.Duration(p.Timeout)*time.Second)
			// The count lives in the store: whichever server probes next
			// continues it.
			n, err := c.st.RecordProbe(ctx, j.ID, i, ok)
			if err != nil {
				c.log.Warn("record probe failed", "job", j.JobName, "error", err)
				return false, time.Second
			}
			if n < max(p.ReadyAfter, 1) {
				ready = false
			}
			if d := time.Duration(p.Interval) * time.Second; d > 0 && d < interval {
				interval = d
			}
		}
	}
	if interval <= 0 {
		interval = time.Second
	}
	return ready, interval
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
