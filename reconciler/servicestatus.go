package reconciler

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"hoist/schema"
	"hoist/store"
)

const (
	// serviceSampleEvery is how often each active service's traffic and
	// replica count are sampled for its dashboard chart.
	serviceSampleEvery = 10 * time.Second
	// serviceSampleKeep is how many samples a service keeps: an hour's.
	serviceSampleKeep = 360
)

// A ServiceStatus is a service as its dashboard shows it (hoist issue 17:
// the service's replicas with their probe state, requests per second, and
// their recent history). cmd/hoist adapts it for the web server; the
// reconciler does not import web.
type ServiceStatus struct {
	// Project and Run name the service.
	Project, Run string
	// RPS is the requests per second the service got over Window, as the
	// autoscaler reads them (the in-server proxy's meter).
	RPS float64
	// Window is the window RPS is averaged over: the newest run's
	// `scaling.window`, or dstack's default of 60 s.
	Window time.Duration
	// MinReplicas and MaxReplicas are the newest run's `replicas` range.
	MinReplicas, MaxReplicas int
	// DesiredReplicas is the replica count wanted now: the autoscaler's
	// when it scales the service on this server, the replicas alive when
	// another server does, replicas.min when the service does not scale.
	DesiredReplicas int
	// ReadyReplicas is how many replicas receive traffic: running and
	// passing their probes.
	ReadyReplicas int
	// Replicas are the unfinished replicas of every active run of the
	// service (during a rolling deployment, the older run's too), newest
	// run first, by replica number.
	Replicas []ServiceReplicaStatus
	// History holds one sample per serviceSampleEvery over the last hour,
	// oldest first. It is kept in the memory of this server process only:
	// it starts empty after a restart, and another server of the same
	// database keeps its own (of the traffic its proxy saw).
	History []ServiceSample
	// SampleEvery is the interval between History's samples.
	SampleEvery time.Duration
}

// A ServiceReplicaStatus is one replica of a service.
type ServiceReplicaStatus struct {
	// JobID and JobName name the replica's latest submission.
	JobID, JobName string
	// Revision is the Git revision of the run the replica belongs to.
	Revision string
	// ReplicaNum is the replica's number, SubmissionNum its submission's.
	ReplicaNum, SubmissionNum int
	// Status is the job's status.
	Status string
	// Addr is host:port of the service port as seen from the replica's
	// instance; empty until the job runs.
	Addr string
	// Ready is set when the replica receives traffic from this server's
	// proxy: running, with every probe passed ready_after times in a row
	// as this server last saw (ServiceRoute's rule).
	Ready bool
	// Probes are the replica's probes, in the spec's order.
	Probes []ProbeStatus
}

// A ProbeStatus is one probe of a replica, as the store counted it.
type ProbeStatus struct {
	// Method and URL are the probe's request.
	Method, URL string
	// Passes is how many times in a row the probe passed.
	Passes int
	// ReadyAfter is how many passes in a row make the replica ready.
	ReadyAfter int
	// LastAt is when the probe last ran, on whichever server (zero:
	// never).
	LastAt time.Time
	// LastOK is the result of that run.
	LastOK bool
}

// A ServiceSample is a service's traffic and replica count at one time.
type ServiceSample struct {
	// At is when the sample was taken.
	At time.Time
	// RPS is the requests per second over the service's window then.
	RPS float64
	// Replicas is how many replicas were ready then.
	Replicas int
	// Desired is the replica count wanted then.
	Desired int
}

// ServiceStatus returns the dashboard view of the project's service named
// run: its active runs' replicas with their probe state, its traffic as
// the autoscaler sees it, and the samples of the last hour. A service
// whose runs all finished has no replicas but keeps its history. An error
// wraps store.ErrNotFound when no service of that name was ever run.
func (c *Controller) ServiceStatus(ctx context.Context, project, run string) (ServiceStatus, error) {
	runs, err := c.serviceRuns(ctx, project, run)
	if err != nil {
		return ServiceStatus{}, err
	}
	if len(runs) == 0 {
		r, err := c.st.GetRunByName(ctx, project, run)
		if err != nil {
			return ServiceStatus{}, fmt.Errorf("service %s/%s: %w", project, run, err)
		}
		if schema.Kind(r.Type) != schema.KindService {
			return ServiceStatus{}, fmt.Errorf("service %s/%s: %w", project, run, store.ErrNotFound)
		}
		spec, err := decodeRunSpec(r.Spec)
		if err != nil {
			return ServiceStatus{}, err
		}
		st := ServiceStatus{Project: project, Run: run, Window: spec.rpsWindow(),
			MinReplicas: spec.minReplicas(), MaxReplicas: spec.maxReplicas(), SampleEvery: c.history.every}
		st.RPS, _, _ = c.serviceTraffic(project, run, st.Window)
		st.History = c.history.samples(project + "/" + run)
		return st, nil
	}
	st, err := c.serviceStatus(ctx, runs)
	if err != nil {
		return ServiceStatus{}, err
	}
	st.History = c.history.samples(project + "/" + run)
	return st, nil
}

// serviceRuns returns the project's active service runs named run that
// are not waiting for their schedule, newest first.
func (c *Controller) serviceRuns(ctx context.Context, project, run string) ([]store.Run, error) {
	runs, err := c.st.ListRuns(ctx, store.RunFilter{Project: project, Name: run, Active: true})
	if err != nil {
		return nil, fmt.Errorf("service %s/%s: %w", project, run, err)
	}
	var svc []store.Run
	for _, r := range runs {
		if schema.Kind(r.Type) == schema.KindService && r.Status != store.RunPending {
			svc = append(svc, r)
		}
	}
	return svc, nil
}

// serviceStatus builds the status, without history, of the active runs of
// one service, newest first.
func (c *Controller) serviceStatus(ctx context.Context, runs []store.Run) (ServiceStatus, error) {
	newest := runs[0]
	spec, err := decodeRunSpec(newest.Spec)
	if err != nil {
		return ServiceStatus{}, err
	}
	st := ServiceStatus{
		Project: newest.Project, Run: newest.Name, Window: spec.rpsWindow(),
		MinReplicas: spec.minReplicas(), MaxReplicas: spec.maxReplicas(), SampleEvery: c.history.every,
	}
	st.RPS, _, _ = c.serviceTraffic(newest.Project, newest.Name, st.Window)
	type replica struct {
		job  store.Job
		spec runSpec
		run  *store.Run
	}
	var reps []replica
	var ids []string
	for i, r := range runs {
		rs := spec
		if i > 0 {
			if rs, err = decodeRunSpec(r.Spec); err != nil {
				return ServiceStatus{}, err
			}
		}
		jobs, err := c.st.ListJobs(ctx, r.ID)
		if err != nil {
			return ServiceStatus{}, fmt.Errorf("service %s/%s: %w", r.Project, r.Name, err)
		}
		alive := 0
		for _, j := range latestSubmissions(jobs) {
			if store.IsJobFinished(j.Status) {
				continue
			}
			if j.Status != store.JobTerminating {
				alive++
			}
			reps = append(reps, replica{job: j, spec: rs, run: &runs[i]})
			ids = append(ids, j.ID)
		}
		if i == 0 {
			st.DesiredReplicas = c.desiredNow(r.ID, spec, alive)
		}
	}
	// The probe counts live in the store (any server may probe next), so
	// every server shows the same.
	counters, err := c.st.ListProbeCounters(ctx, ids...)
	if err != nil {
		return ServiceStatus{}, fmt.Errorf("service %s/%s: %w", newest.Project, newest.Name, err)
	}
	byJob := map[string][]store.ProbeCounter{}
	for _, pc := range counters {
		byJob[pc.JobID] = append(byJob[pc.JobID], pc)
	}
	for _, r := range reps {
		rep := c.replicaStatus(r.job, r.spec, byJob[r.job.ID])
		rep.Revision = r.run.Revision
		// A run being retired gets no more traffic (ServiceRoute).
		rep.Ready = rep.Ready && r.run.Status != store.RunTerminating
		if rep.Ready {
			st.ReadyReplicas++
		}
		st.Replicas = append(st.Replicas, rep)
	}
	return st, nil
}

// replicaStatus is job j's row of the dashboard, with its probes'
// counters.
func (c *Controller) replicaStatus(j store.Job, spec runSpec, counters []store.ProbeCounter) ServiceReplicaStatus {
	rep := ServiceReplicaStatus{JobID: j.ID, JobName: j.JobName, ReplicaNum: j.ReplicaNum,
		SubmissionNum: j.SubmissionNum, Status: j.Status}
	var rd runtimeData
	if json.Unmarshal(j.RuntimeData, &rd) == nil {
		rep.Addr = rd.ServiceAddr
	}
	rep.Ready = j.Status == store.JobRunning && rep.Addr != "" && c.replicaReady(j.ID, spec.Probes)
	for i, p := range spec.Probes {
		ps := ProbeStatus{Method: p.Method, URL: p.URL, ReadyAfter: max(p.ReadyAfter, 1)}
		if ps.Method == "" {
			ps.Method = "get"
		}
		for _, pc := range counters {
			if pc.Probe == i {
				// A failure resets the count: a count above zero means
				// the last run passed.
				ps.Passes, ps.LastAt, ps.LastOK = pc.Passes, pc.UpdatedAt, pc.Passes > 0
			}
		}
		rep.Probes = append(rep.Probes, ps)
	}
	return rep
}

// desiredNow is the replica count a service run wants now, read without
// moving the autoscaler: its state when this server scales the run, the
// replicas alive when it does not (another server holds the run, which
// keeps them at its count), replicas.min for a fixed count.
func (c *Controller) desiredNow(runID string, spec runSpec, alive int) int {
	if !spec.scales() {
		return spec.minReplicas()
	}
	c.svcMu.Lock()
	defer c.svcMu.Unlock()
	if st, ok := c.scales[runID]; ok && st.init {
		return min(max(st.desired, spec.minReplicas()), spec.maxReplicas())
	}
	return alive
}

// serviceSampleLoop samples every active service every serviceSampleEvery
// until ctx is done.
func (c *Controller) serviceSampleLoop(ctx context.Context) {
	every(ctx, c.history.every, c.sampleServices)
}

// sampleServices adds a sample of each active service of the project to
// its history, and drops the histories of services that had no sample for
// as long as a history spans.
func (c *Controller) sampleServices(ctx context.Context) {
	runs, err := c.st.ListRuns(ctx, store.RunFilter{Project: c.cfg.Project, Type: string(schema.KindService), Active: true, Limit: 100000})
	if err != nil {
		c.log.Warn("list services failed", "error", err)
		return
	}
	names, byName := servicesByName(runs)
	now := c.now()
	for _, n := range names {
		st, err := c.serviceStatus(ctx, byName[n])
		if err != nil {
			if !errors.Is(err, context.Canceled) {
				c.log.Warn("sample service failed", "run", n, "error", err)
			}
			continue
		}
		c.history.add(st.Project+"/"+st.Run, ServiceSample{At: now, RPS: st.RPS, Replicas: st.ReadyReplicas, Desired: st.DesiredReplicas})
	}
	c.history.prune(now)
}

// serviceHistory keeps a bounded ring of samples per service (by
// "project/run"), in memory.
type serviceHistory struct {
	every time.Duration
	size  int

	mu    sync.Mutex
	rings map[string]*sampleRing
}

func newServiceHistory(every time.Duration, size int) *serviceHistory {
	return &serviceHistory{every: every, size: size, rings: map[string]*sampleRing{}}
}

// add appends s to key's ring. A sample taken less than half an interval
// after the newest one replaces it, so the ring holds about one sample
// per interval however often it is fed.
func (h *serviceHistory) add(key string, s ServiceSample) {
	h.mu.Lock()
	defer h.mu.Unlock()
	r, ok := h.rings[key]
	if !ok {
		r = &sampleRing{buf: make([]ServiceSample, h.size)}
		h.rings[key] = r
	}
	if last, ok := r.newest(); ok && s.At.Sub(last.At) < h.every/2 {
		r.buf[(r.start+r.n-1)%len(r.buf)] = s
		return
	}
	r.push(s)
}

// samples returns a copy of key's samples, oldest first.
func (h *serviceHistory) samples(key string) []ServiceSample {
	h.mu.Lock()
	defer h.mu.Unlock()
	r, ok := h.rings[key]
	if !ok {
		return nil
	}
	out := make([]ServiceSample, r.n)
	for i := range out {
		out[i] = r.buf[(r.start+i)%len(r.buf)]
	}
	return out
}

// prune drops the rings whose newest sample is older than a ring spans.
func (h *serviceHistory) prune(now time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for k, r := range h.rings {
		if last, ok := r.newest(); !ok || now.Sub(last.At) > h.every*time.Duration(h.size) {
			delete(h.rings, k)
		}
	}
}

// sampleRing is a fixed-size ring of samples; the oldest goes when full.
type sampleRing struct {
	buf      []ServiceSample
	start, n int
}

func (r *sampleRing) push(s ServiceSample) {
	if r.n < len(r.buf) {
		r.buf[(r.start+r.n)%len(r.buf)] = s
		r.n++
		return
	}
	r.buf[r.start] = s
	r.start = (r.start + 1) % len(r.buf)
}

func (r *sampleRing) newest() (ServiceSample, bool) {
	if r.n == 0 {
		return ServiceSample{}, false
	}
	return r.buf[(r.start+r.n-1)%len(r.buf)], true
}
