package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"hoist/reconciler"
	"hoist/store"
	"hoist/web"
)

// services is web.Services over the reconciler's service routes: the
// reconciler does not import web, so its types are copied into web's here.
// The proxy and the gateways serve every project: each project's service
// is asked of its own controller (byProject), else of ctrl.
type services struct {
	ctrl      *reconciler.Controller
	byProject map[string]*reconciler.Controller
}

// of is the controller of project.
func (s services) of(project string) *reconciler.Controller {
	if c, ok := s.byProject[project]; ok {
		return c
	}
	return s.ctrl
}

var (
	_ web.Services        = services{}
	_ web.ServiceStatuses = services{}
)

// Service returns the routing view of a service run.
func (s services) Service(ctx context.Context, project, run string) (web.Service, error) {
	rt, err := s.of(project).ServiceRoute(ctx, project, run)
	if err != nil {
		return web.Service{}, webNotFound(err)
	}
	return webService(rt), nil
}

// Models returns the project's service runs that declare a `model`.
func (s services) Models(ctx context.Context, project string) ([]web.Service, error) {
	rts, err := s.of(project).ServiceModels(ctx, project)
	if err != nil {
		return nil, webNotFound(err)
	}
	out := make([]web.Service, len(rts))
	for i, rt := range rts {
		out[i] = webService(rt)
	}
	return out, nil
}

var _ web.GatewayServices = services{}

// GatewayURLs returns where a gateway serves a service run.
func (s services) GatewayURLs(ctx context.Context, project, run string) (web.ServiceURLs, bool, error) {
	u, ok, err := s.of(project).GatewayURLs(ctx, project, run)
	return web.ServiceURLs{Service: u.Service, Model: u.Model}, ok, webNotFound(err)
}

// Wake asks for a replica of a run scaled to zero.
func (s services) Wake(ctx context.Context, project, run string) error {
	return webNotFound(s.of(project).WakeService(ctx, project, run))
}

// ServiceStatus returns the dashboard view of a service.
func (s services) ServiceStatus(ctx context.Context, project, run string) (web.ServiceStatus, error) {
	st, err := s.of(project).ServiceStatus(ctx, project, run)
	if err != nil {
		return web.ServiceStatus{}, webNotFound(err)
	}
	return webServiceStatus(st), nil
}

// webNotFound makes the store's not-found web's, which the proxy answers
// with 404.
func webNotFound(err error) error {
	if errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("%w: %w", web.ErrNotFound, err)
	}
	return err
}

func webService(rt reconciler.ServiceRoute) web.Service {
	out := web.Service{Project: rt.Project, Run: rt.Run, Auth: rt.Auth, StripPrefix: rt.StripPrefix, MinReplicas: rt.MinReplicas}
	if m := rt.Model; m != nil {
		out.Model = &web.ServiceModel{Name: m.Name, Format: m.Format, Prefix: m.Prefix, ChatTemplate: m.ChatTemplate, EOSToken: m.EOSToken}
	}
	for _, l := range rt.RateLimits {
		out.RateLimits = append(out.RateLimits, web.ServiceRateLimit{Prefix: l.Prefix, Header: l.Header, RPS: l.RPS, Burst: l.Burst})
	}
	for _, r := range rt.Replicas {
		out.Replicas = append(out.Replicas, web.Replica{JobID: r.JobID, Addr: r.Addr, Transport: r.Transport})
	}
	return out
}

func webServiceStatus(st reconciler.ServiceStatus) web.ServiceStatus {
	out := web.ServiceStatus{
		RPS: st.RPS, RPSWindowSeconds: int(st.Window / time.Second),
		MinReplicas: st.MinReplicas, MaxReplicas: st.MaxReplicas,
		DesiredReplicas: st.DesiredReplicas, ReadyReplicas: st.ReadyReplicas,
		HistoryIntervalSeconds: int(st.SampleEvery / time.Second),
	}
	for _, r := range st.Replicas {
		wr := web.ServiceReplicaStatus{JobID: r.JobID, JobName: r.JobName, Revision: r.Revision, ReplicaNum: r.ReplicaNum,
			SubmissionNum: r.SubmissionNum, Status: r.Status, Address: r.Addr, Ready: r.Ready}
		for _, p := range r.Probes {
			wp := web.ProbeStatus{Method: p.Method, URL: p.URL, Passes: p.Passes, ReadyAfter: p.ReadyAfter}
			if !p.LastAt.IsZero() {
				at, ok := p.LastAt.UTC(), p.LastOK
				wp.LastProbeAt, wp.LastOK = &at, &ok
			}
			wr.Probes = append(wr.Probes, wp)
		}
		out.Replicas = append(out.Replicas, wr)
	}
	for _, h := range st.History {
		out.History = append(out.History, web.ServiceSample{At: h.At.UTC(), RPS: h.RPS, Replicas: h.Replicas, DesiredReplicas: h.Desired})
	}
	return out
}
