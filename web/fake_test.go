package web

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"
)

// memStore is an in-memory Store for handler tests; browser tests use the
// real store.
type memStore struct {
	mu     sync.Mutex
	runs   map[string]Run
	logs   map[string][]LogLine
	events []Event
	revs   []Revision
}

func newMemStore() *memStore {
	return &memStore{runs: map[string]Run{}, logs: map[string][]LogLine{}}
}

func (m *memStore) putRun(r Run) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.runs[r.Name] = r
}

func (m *memStore) appendLog(jobID string, texts ...string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	ls := m.logs[jobID]
	for _, t := range texts {
		seq := int64(len(ls) + 1)
		ls = append(ls, LogLine{Seq: seq, Time: time.Unix(1700000000+seq, 0).UTC(), Text: t})
	}
	m.logs[jobID] = ls
}

func (m *memStore) ListRuns(_ context.Context, f RunFilter) ([]Run, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []Run
	for _, r := range m.runs {
		if (f.Status == "" || r.Status == f.Status) && (f.Type == "" || r.Type == f.Type) && (f.Fleet == "" || r.Fleet == f.Fleet) {
			r.Jobs, r.Spec = nil, nil
			out = append(out, r)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if !out[i].SubmittedAt.Equal(out[j].SubmittedAt) {
			return out[i].SubmittedAt.After(out[j].SubmittedAt)
		}
		return out[i].Name < out[j].Name
	})
	out = out[min(f.Offset, len(out)):]
	if f.Limit > 0 && len(out) > f.Limit {
		out = out[:f.Limit]
	}
	return out, nil
}

func (m *memStore) GetRun(_ context.Context, name string) (Run, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	r, ok := m.runs[name]
	if !ok {
		return Run{}, ErrNotFound
	}
	r.Jobs = slices.Clone(r.Jobs)
	return r, nil
}

func (m *memStore) ReadLogs(_ context.Context, jobID string, after int64, limit int) ([]LogLine, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []LogLine
	for _, l := range m.logs[jobID] {
		if l.Seq > after {
			out = append(out, l)
			if limit > 0 && len(out) == limit {
				break
			}
		}
	}
	return out, nil
}

func (m *memStore) ListEvents(_ context.Context, f EventFilter) ([]Event, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []Event
	for i := len(m.events) - 1; i >= 0; i-- {
		e := m.events[i]
		if (f.Kind == "" || e.Kind == f.Kind) && (f.Name == "" || e.Name == f.Name) && (f.Revision == "" || e.Revision == f.Revision) {
			out = append(out, e)
		}
	}
	return out, nil
}

// fakeSyncer records sync requests and handles each at once.
type fakeSyncer struct {
	mu       sync.Mutex
	status   SyncStatus
	requests uint64
}

func (f *fakeSyncer) SyncStatus(context.Context) (SyncStatus, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.status, nil
}

func (f *fakeSyncer) RequestSync() uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.requests++
	return f.requests
}

func (f *fakeSyncer) WaitSynced(context.Context, uint64) error { return nil }

// count is how many syncs were requested.
func (f *fakeSyncer) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return int(f.requests)
}

// fakeTokens maps plaintext tokens to principals.
type fakeTokens map[string]Principal

func (f fakeTokens) LookupToken(_ context.Context, tok string) (Principal, error) {
	p, ok := f[tok]
	if !ok {
		return Principal{}, ErrNotFound
	}
	return p, nil
}

func (m *memStore) ListJobs(_ context.Context, f JobFilter) ([]Job, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []Job
	for _, r := range m.runs {
		for _, j := range r.Jobs {
			if j.FinishedAt != nil && j.FinishedAt.Before(f.Since) {
				continue
			}
			j.RunName = r.Name
			out = append(out, j)
		}
	}
	sort.Slice(out, func(i, k int) bool { return out[i].SubmittedAt.After(out[k].SubmittedAt) })
	return out, nil
}

func (m *memStore) ListRevisions(_ context.Context, limit int) ([]Revision, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := slices.Clone(m.revs)
	if limit > 0 && len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

func (m *memStore) GetRevision(_ context.Context, sha string) (Revision, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, r := range m.revs {
		if r.SHA == sha {
			return r, nil
		}
	}
	return Revision{}, ErrNotFound
}

// fakeInventory serves fixed fleets, instances, volumes and gateways.
type fakeInventory struct {
	fleets    []Fleet
	instances []Instance
	volumes   []Volume
	gateways  []Gateway
}

func (f *fakeInventory) ListFleets(context.Context) ([]Fleet, error) { return f.fleets, nil }
func (f *fakeInventory) ListInstances(_ context.Context, fleet string) ([]Instance, error) {
	var out []Instance
	for _, i := range f.instances {
		if fleet == "" || i.Fleet == fleet {
			out = append(out, i)
		}
	}
	return out, nil
}
func (f *fakeInventory) ListVolumes(context.Context) ([]Volume, error)   { return f.volumes, nil }
func (f *fakeInventory) ListGateways(context.Context) ([]Gateway, error) { return f.gateways, nil }

// fakePlanner plans from fixed specs per revision.
type fakePlanner struct {
	mu      sync.Mutex
	specs   map[string]map[string]json.RawMessage
	plans   map[string]Plan
	calls   []string
	planned chan string
}

func (f *fakePlanner) PlanFiles(_ context.Context, files map[string][]byte) (Plan, error) {
	var ch []Change
	for name := range files {
		ch = append(ch, Change{Action: "create", Kind: "task", Name: name})
	}
	return Plan{Valid: true, Errors: []string{}, Changes: ch}, nil
}

func (f *fakePlanner) PlanRevision(_ context.Context, ref, sha string) (Plan, error) {
	f.mu.Lock()
	f.calls = append(f.calls, ref+"@"+sha)
	p, ok := f.plans[sha]
	ch := f.planned
	f.mu.Unlock()
	if ch != nil {
		defer func() { ch <- sha }()
	}
	if !ok {
		return Plan{}, errors.New("unknown revision")
	}
	return p, nil
}

func (f *fakePlanner) SpecsAt(_ context.Context, sha string) (map[string]json.RawMessage, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	s, ok := f.specs[sha]
	if !ok {
		return nil, ErrNotFound
	}
	return s, nil
}

// fakeController records actions.
type fakeController struct {
	mu       sync.Mutex
	actions  []string
	autoSync bool
}

func (f *fakeController) record(a string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.actions = append(f.actions, a)
	return nil
}
func (f *fakeController) StopRun(_ context.Context, n string, abort bool) error {
	if abort {
		return f.record("abort " + n)
	}
	return f.record("stop " + n)
}
func (f *fakeController) RerunRun(_ context.Context, n string) error { return f.record("rerun " + n) }
func (f *fakeController) SetRunSuspended(_ context.Context, n string, s bool) error {
	return f.record(fmt.Sprintf("suspend %s %v", n, s))
}
func (f *fakeController) SetAutoSync(_ context.Context, on bool) error {
	f.mu.Lock()
	f.autoSync = on
	f.mu.Unlock()
	return f.record(fmt.Sprintf("autosync %v", on))
}
func (f *fakeController) ApplyRevision(_ context.Context, sha string) error {
	return f.record("apply " + sha)
}
func (f *fakeController) list() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.actions)
}

func (f *fakeController) ConfirmRevision(_ context.Context, sha string) error {
	return f.record("confirm " + sha)
}

// memArtifacts holds artifact files by run, job number and path.
type memArtifacts struct {
	files map[string]map[int]map[string]string
}

func (m *memArtifacts) ListArtifacts(_ context.Context, run string, jobNum int) ([]Artifact, error) {
	jobs, ok := m.files[run]
	if !ok {
		return nil, ErrNotFound
	}
	var out []Artifact
	for n, files := range jobs {
		if jobNum >= 0 && n != jobNum {
			continue
		}
		for p, body := range files {
			out = append(out, Artifact{JobNum: n, Path: p, Size: int64(len(body))})
		}
	}
	return out, nil
}

func (m *memArtifacts) OpenArtifact(_ context.Context, run string, jobNum int, file string) (io.ReadCloser, Artifact, error) {
	body, ok := m.files[run][jobNum][file]
	if !ok {
		return nil, Artifact{}, ErrNotFound
	}
	return io.NopCloser(strings.NewReader(body)), Artifact{JobNum: jobNum, Path: file, Size: int64(len(body))}, nil
}

// Audit is web.Auditor: one leaked instance.
func (f *fakeController) Audit(context.Context) (Audit, error) {
	return Audit{Project: "main", CheckedAt: "2026-01-02T03:04:05Z", GraceSeconds: 600,
		Leaked:     []AuditLeaked{{Backend: "aws", Kind: "instance", ID: "i-1", ProviderID: "i-0abc", ReapAt: "2026-01-02T03:10:00Z"}},
		Lost:       []AuditLost{},
		Duplicated: []AuditDuplicate{},
		Errors:     []AuditError{}}, nil
}
