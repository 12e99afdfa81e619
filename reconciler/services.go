package reconciler

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"hoist/schema"
	"hoist/store"
)

// A ServiceRoute is a service run as the in-server proxy routes to it
// (dstack's service spec as its proxy sees it, in
// src/dstack/_internal/proxy/lib/models.py). cmd/hoist adapts it to
// web.Service; the reconciler does not import web.
type ServiceRoute struct {
	// Project and Run name the run.
	Project, Run string
	// Auth requires a token of the project (`auth`, true by default).
	Auth bool
	// StripPrefix removes the service's path prefix from the forwarded
	// path (`strip_prefix`, true by default).
	StripPrefix bool
	// Model is the run's `model`, nil when it declares none.
	Model *ServiceModel
	// RateLimits are the run's `rate_limits`.
	RateLimits []ServiceRateLimit
	// MinReplicas is the low end of `replicas`: 0 means the run scales to
	// zero, and a request wakes it (WakeService).
	MinReplicas int
	// Replicas are the ready replicas: running, and passing their probes.
	Replicas []ServiceReplica
}

// A ServiceModel is a service's `model` (dstack's ModelInfo).
type ServiceModel struct {
	// Name is matched against a request's `model`.
	Name string
	// Format is "openai" or "tgi".
	Format string
	// Prefix is the path prefix of an openai-format upstream.
	Prefix string
	// ChatTemplate and EOSToken are a tgi-format model's: the spec's, or
	// its tokenizer_config.json's on the Hugging Face Hub (completeModel).
	ChatTemplate, EOSToken string
}

// A ServiceRateLimit is one of a service's `rate_limits`, per client IP
// or per value of a request header.
type ServiceRateLimit struct {
	// Prefix is the path prefix (below the service's URL) it applies to.
	Prefix string
	// Header, when set, keys the limit by that header's value (`key:
	// {type: header}`) instead of the client's address.
	Header string
	// RPS is the sustained rate allowed, Burst the bucket size.
	RPS   float64
	Burst int
}

// A ServiceReplica is one ready replica of a service run.
type ServiceReplica struct {
	// JobID is the replica's job.
	JobID string
	// Addr is host:port of the service port as Transport dials it.
	Addr string
	// Transport dials through the connection the server holds to the
	// replica's instance (shim tunnel, SSH, port-forward).
	Transport http.RoundTripper
}

// ServiceRoute returns the routing view of the project's service run
// named run: the newest active run's settings, and the ready replicas of
// every active run of that name (during a rolling deployment traffic
// moves to the new run's replicas as they become ready). An error wraps
// store.ErrNotFound when no such service runs.
func (c *Controller) ServiceRoute(ctx context.Context, project, run string) (ServiceRoute, error) {
	runs, err := c.st.ListRuns(ctx, store.RunFilter{Project: project, Name: run, Active: true})
	if err != nil {
		return ServiceRoute{}, fmt.Errorf("service %s/%s: %w", project, run, err)
	}
	var svc []store.Run
	for _, r := range runs {
		if schema.Kind(r.Type) == schema.KindService && r.Status != store.RunPending {
			svc = append(svc, r)
		}
	}
	if len(svc) == 0 {
		return ServiceRoute{}, fmt.Errorf("service %s/%s: %w", project, run, store.ErrNotFound)
	}
	return c.serviceRoute(ctx, svc)
}

// serviceRoute builds the route of the active runs of one service, newest
// first.
func (c *Controller) serviceRoute(ctx context.Context, runs []store.Run) (ServiceRoute, error) {
	newest := runs[0]
	spec, err := decodeRunSpec(newest.Spec)
	if err != nil {
		return ServiceRoute{}, err
	}
	rt := ServiceRoute{
		Project: newest.Project, Run: newest.Name,
		Auth: spec.Auth, StripPrefix: spec.StripPrefix, MinReplicas: spec.minReplicas(),
	}
	if m := spec.Model; m != nil {
		rt.Model = &ServiceModel{Name: m.Name, Format: m.Format, Prefix: m.Prefix, ChatTemplate: m.ChatTemplate, EOSToken: m.EOSToken}
	}
	for _, l := range spec.RateLimits {
		rl := ServiceRateLimit{Prefix: l.Prefix, RPS: l.RPS, Burst: int(l.Burst)}
		if l.Key.Type == "header" {
			rl.Header = l.Key.Header
		}
		rt.RateLimits = append(rt.RateLimits, rl)
	}
	for _, r := range runs {
		if r.Status == store.RunTerminating {
			continue
		}
		rs := spec
		if r.ID != newest.ID {
			if rs, err = decodeRunSpec(r.Spec); err != nil {
				return ServiceRoute{}, err
			}
		}
		jobs, err := c.st.ListJobs(ctx, r.ID)
		if err != nil {
			return ServiceRoute{}, fmt.Errorf("service %s/%s: %w", r.Project, r.Name, err)
		}
		for _, j := range latestSubmissions(jobs) {
			if rep, ok := c.readyReplica(ctx, j, rs); ok {
				rt.Replicas = append(rt.Replicas, rep)
			}
		}
	}
	return rt, nil
}

// readyReplica returns how the proxy reaches job j, if it is running and
// passing its probes.
func (c *Controller) readyReplica(ctx context.Context, j store.Job, spec runSpec) (ServiceReplica, bool) {
	if j.Status != store.JobRunning || !c.replicaReady(j.ID, spec.Probes) {
		return ServiceReplica{}, false
	}
	var rd runtimeData
	if json.Unmarshal(j.RuntimeData, &rd) != nil || rd.ServiceAddr == "" {
		return ServiceReplica{}, false
	}
	_, conn, err := c.shimFor(ctx, j.InstanceID)
	if err != nil {
		c.log.Warn("service replica unreachable", "job", j.JobName, "error", err)
		return ServiceReplica{}, false
	}
	var tr http.RoundTripper = http.DefaultTransport
	if hc := conn.HTTPClient(); hc != nil && hc.Transport != nil {
		tr = hc.Transport
	}
	return ServiceReplica{JobID: j.ID, Addr: rd.ServiceAddr, Transport: tr}, true
}

// ServiceModels returns the routes of the project's active service runs
// that declare a `model` (dstack's /proxy/models/<project>), one per run
// name.
func (c *Controller) ServiceModels(ctx context.Context, project string) ([]ServiceRoute, error) {
	runs, err := c.st.ListRuns(ctx, store.RunFilter{Project: project, Type: string(schema.KindService), Active: true, Limit: 1000})
	if err != nil {
		return nil, fmt.Errorf("service models of %s: %w", project, err)
	}
	names, byName := servicesByName(runs)
	var out []ServiceRoute
	for _, n := range names {
		spec, err := decodeRunSpec(byName[n][0].Spec)
		if err != nil || spec.Model == nil {
			continue
		}
		rt, err := c.serviceRoute(ctx, byName[n])
		if err != nil {
			return nil, err
		}
		out = append(out, rt)
	}
	return out, nil
}

// WakeService asks for one replica of the project's service run named run
// now, if it scaled to zero (dstack scales from zero on a request). It
// returns at once; the run worker starts the replica, and ServiceRoute
// lists it once it is ready.
func (c *Controller) WakeService(ctx context.Context, project, run string) error {
	r, err := c.st.GetRunByName(ctx, project, run)
	if err != nil {
		return fmt.Errorf("wake service %s/%s: %w", project, run, err)
	}
	if schema.Kind(r.Type) != schema.KindService || store.IsRunFinished(r.Status) {
		return fmt.Errorf("wake service %s/%s: %w", project, run, store.ErrNotFound)
	}
	c.svcMu.Lock()
	st := c.scaleFor(r.ID)
	if st.desired < 1 {
		st.desired = 1
		st.changedAt = c.now()
		st.woken = true
	}
	c.svcMu.Unlock()
	c.runs.Add(r.ID)
	return nil
}

// ServiceURLs are where a service run on a gateway is served (dstack's
// service and model URLs, src/dstack/_internal/server/services/services/__init__.py).
type ServiceURLs struct {
	// Service is http[s]://<run>.<domain>/.
	Service string
	// Model is the base URL of its `model`: the service URL and the
	// model's prefix for `format: openai`, http[s]://gateway.<domain>/
	// otherwise; empty without a model.
	Model string
}

// GatewayURLs returns the URLs of the project's service run named run at
// the gateway that serves it; ok is false when no gateway serves it (hoist's
// own proxy does).
func (c *Controller) GatewayURLs(ctx context.Context, project, run string) (ServiceURLs, bool, error) {
	r, err := c.st.GetRunByName(ctx, project, run)
	if err != nil {
		return ServiceURLs{}, false, fmt.Errorf("service %s/%s: %w", project, run, err)
	}
	if schema.Kind(r.Type) != schema.KindService {
		return ServiceURLs{}, false, nil
	}
	spec, err := decodeRunSpec(r.Spec)
	if err != nil {
		return ServiceURLs{}, false, err
	}
	g, gs, ok := c.serviceGateway(ctx, spec)
	if !ok || gs.Domain == "" {
		return ServiceURLs{}, false, nil
	}
	domain := gatewayDomain(gs.Domain, g.Project)
	scheme, port := "http", g.HTTPPort
	if serviceHTTPS(spec.HTTPS, c.gatewayTLS(&gs, domain) != nil) {
		scheme, port = "https", g.HTTPSPort
	}
	// A gateway listening on a port other than the scheme's (a local
	// gateway of an unprivileged server) is reached with it in the URL.
	suffix := ""
	if port != 0 && !(scheme == "http" && port == 80) && !(scheme == "https" && port == 443) {
		suffix = ":" + strconv.Itoa(port)
	}
	u := ServiceURLs{Service: scheme + "://" + run + "." + domain + suffix + "/"}
	if m := spec.Model; m != nil {
		if m.Format == "openai" || m.Format == "" {
			u.Model = u.Service + strings.TrimPrefix(m.Prefix, "/")
		} else {
			u.Model = scheme + "://gateway." + domain + suffix + "/"
		}
	}
	return u, true, nil
}

// servicesByName groups the runs of services that have left pending by
// name (a rolling deployment has two runs of one name), the names in the
// order the runs came.
func servicesByName(runs []store.Run) ([]string, map[string][]store.Run) {
	byName := map[string][]store.Run{}
	var names []string
	for _, r := range runs {
		if r.Status == store.RunPending {
			continue
		}
		if _, ok := byName[r.Name]; !ok {
			names = append(names, r.Name)
		}
		byName[r.Name] = append(byName[r.Name], r)
	}
	return names, byName
}
