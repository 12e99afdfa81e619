package shim

import (
	"slices"
	"testing"

	"hoist/agents/api"
)

// TestTransition_everyPair checks every (from, to) pair of task statuses
// against the lifecycle: forward steps (pulling may be skipped) and
// termination from any live status; nothing else, no self-loops, nothing
// out of terminated.
func TestTransition_everyPair(t *testing.T) {
	allowed := map[[2]string]bool{
		{api.TaskPending, api.TaskPreparing}:    true,
		{api.TaskPending, api.TaskTerminated}:   true,
		{api.TaskPreparing, api.TaskPulling}:    true,
		{api.TaskPreparing, api.TaskCreating}:   true,
		{api.TaskPreparing, api.TaskTerminated}: true,
		{api.TaskPulling, api.TaskCreating}:     true,
		{api.TaskPulling, api.TaskTerminated}:   true,
		{api.TaskCreating, api.TaskRunning}:     true,
		{api.TaskCreating, api.TaskTerminated}:  true,
		{api.TaskRunning, api.TaskTerminated}:   true,
	}
	statuses := append(append([]string(nil), api.TaskStatuses...), "bogus")
	for _, from := range statuses {
		for _, to := range statuses {
			err := Transition(from, to)
			if want := allowed[[2]string{from, to}]; (err == nil) != want {
				t.Errorf("Transition(%s, %s) = %v, want allowed=%v", from, to, err, want)
			}
		}
	}
	if len(api.TaskStatuses) != len(transitions) {
		t.Errorf("transition table has %d statuses, api has %d", len(transitions), len(api.TaskStatuses))
	}
}

func TestPullTracker_foldsLayerProgress(t *testing.T) {
	p := newPullTracker()
	prog := func(cur, total int64) *struct {
		Current int64 `json:"current"`
		Total   int64 `json:"total"`
	} {
		return &struct {
			Current int64 `json:"current"`
			Total   int64 `json:"total"`
		}{cur, total}
	}
	msgs := []pullMessage{
		{Status: "Pulling from hoist-test/busybox", ID: "1"},
		{Status: "Already exists", ID: "base"},
		{Status: "Pulling fs layer", ID: "top"},
		{Status: "Pulling fs layer", ID: "mid"},
		{Status: "Downloading", ID: "top", Progress: prog(100, 1000)},
	}
	for _, m := range msgs {
		if err := p.add(m); err != nil {
			t.Fatal(err)
		}
	}
	if got, want := p.progress(false), (api.PullProgress{DownloadedBytes: 100, TotalBytes: 1000}); got != want {
		t.Errorf("mid-pull progress = %+v, want %+v (mid's size still unknown)", got, want)
	}
	for _, m := range []pullMessage{
		{Status: "Downloading", ID: "mid", Progress: prog(50, 500)},
		{Status: "Download complete", ID: "top"},
		{Status: "Extracting", ID: "top", Progress: prog(400, 1000)},
	} {
		if err := p.add(m); err != nil {
			t.Fatal(err)
		}
	}
	if got, want := p.progress(false), (api.PullProgress{DownloadedBytes: 1050, ExtractedBytes: 400, TotalBytes: 1500, TotalFinal: true}); got != want {
		t.Errorf("progress = %+v, want %+v", got, want)
	}
	for _, m := range []pullMessage{{Status: "Pull complete", ID: "top"}, {Status: "Pull complete", ID: "mid"}, {Status: "Digest: sha256:abc"}} {
		if err := p.add(m); err != nil {
			t.Fatal(err)
		}
	}
	if got, want := p.progress(true), (api.PullProgress{DownloadedBytes: 1500, ExtractedBytes: 1500, TotalBytes: 1500, TotalFinal: true}); got != want {
		t.Errorf("final progress = %+v, want %+v", got, want)
	}
	err := p.add(pullMessage{Error: &struct {
		Message string `json:"message"`
	}{"unauthorized: authentication required"}})
	if err == nil || err.Error() != "unauthorized: authentication required" {
		t.Errorf("error message: err = %v", err)
	}
}

func TestExitReason(t *testing.T) {
	code := func(c int) *int { return &c }
	tests := []struct {
		name   string
		code   *int
		oom    bool
		job    *api.JobState
		gone   bool
		reason string
	}{
		{"container gone", nil, false, nil, true, api.ReasonContainerLost},
		{"oom", code(137), true, nil, false, api.ReasonContainerExitedWithError},
		{"job done", code(0), false, &api.JobState{State: api.JobDone}, false, api.ReasonDoneByRunner},
		{"job failed", code(1), false, &api.JobState{State: api.JobFailed}, false, api.ReasonContainerExitedWithError},
		{"job over its max duration", code(1), false, &api.JobState{State: api.JobTerminated, TerminationReason: api.ReasonMaxDurationExceeded}, false, api.ReasonMaxDurationExceeded},
		{"killed while running", code(137), false, &api.JobState{State: api.JobRunning}, false, api.ReasonContainerExitedWithError},
		{"exit 0 without a job", code(0), false, nil, false, api.ReasonDoneByRunner},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got, _ := exitReason(tt.code, tt.oom, tt.job, tt.gone); got != tt.reason {
				t.Errorf("exitReason = %s, want %s", got, tt.reason)
			}
		})
	}
}

func TestPickGPUs(t *testing.T) {
	pool := []string{"0", "1", "2", "3"}
	tests := []struct {
		name    string
		held    map[string]bool
		count   int
		want    []string
		wantErr bool
	}{
		{"first free in order", nil, 2, []string{"0", "1"}, false},
		{"skips held", map[string]bool{"0": true, "2": true}, 2, []string{"1", "3"}, false},
		{"all free ones", map[string]bool{"1": true}, -1, []string{"0", "2", "3"}, false},
		{"all of none free", map[string]bool{"0": true, "1": true, "2": true, "3": true}, -1, nil, false},
		{"too few free", map[string]bool{"0": true, "1": true, "2": true}, 2, nil, true},
		{"more than the host has", nil, 5, nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := pickGPUs(pool, tt.held, tt.count)
			if (err != nil) != tt.wantErr || !slices.Equal(got, tt.want) {
				t.Errorf("pickGPUs = %v, %v; want %v, error %t", got, err, tt.want, tt.wantErr)
			}
		})
	}
}
