package web

import (
	"context"
	"slices"
	"sort"
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

// fakeSyncer records syncs; block, when set, holds each sync until a value
// is received.
type fakeSyncer struct {
	mu     sync.Mutex
	status SyncStatus
	syncs  int
	block  chan struct{}
	began  chan struct{}
}

func (f *fakeSyncer) SyncStatus(context.Context) (SyncStatus, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.status, nil
}

func (f *fakeSyncer) Sync(ctx context.Context) error {
	f.mu.Lock()
	f.syncs++
	block, began := f.block, f.began
	f.mu.Unlock()
	if began != nil {
		began <- struct{}{}
	}
	if block != nil {
		select {
		case <-block:
		case <-ctx.Done():
		}
	}
	return nil
}

func (f *fakeSyncer) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.syncs
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
