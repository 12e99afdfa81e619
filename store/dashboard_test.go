package store

import (
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// dashboardFixture holds the rows the dashboard queries are tested on.
type dashboardFixture struct {
	gpu, old       Fleet
	train, hello   Run
	serve, retired Run
}

// seedDashboard writes, in the default project: fleets "gpu" and "old"
// (deleted); runs train (task, running, gpu), hello (task, done, gpu),
// serve (service, failed, old) and retired (deleted); and in project
// "other" a run on a fleet also named "gpu". Runs are submitted a minute
// apart, train last.
func seedDashboard(t *testing.T, s *Store, clock *fakeClock) dashboardFixture {
	t.Helper()
	ctx := t.Context()
	var f dashboardFixture
	f.gpu = Fleet{Name: "gpu", Status: FleetActive}
	f.old = Fleet{Name: "old", Status: FleetActive}
	otherGPU := Fleet{Project: "other", Name: "gpu", Status: FleetActive}
	for _, fl := range []*Fleet{&f.gpu, &f.old, &otherGPU} {
		if err := s.CreateFleet(ctx, fl); err != nil {
			t.Fatal(err)
		}
	}
	f.old.Deleted = true
	if err := s.UpdateFleet(ctx, &f.old); err != nil {
		t.Fatal(err)
	}
	f.retired = Run{Name: "retired", Type: "task", Status: RunDone, FleetID: f.gpu.ID, Deleted: true}
	f.serve = Run{Name: "serve", Type: "service", Status: RunFailed, FleetID: f.old.ID, Spec: []byte(`{"port":80}`)}
	f.hello = Run{Name: "hello", Type: "task", Status: RunDone, FleetID: f.gpu.ID, Revision: "r1", RemovedFromGit: true}
	f.train = Run{Name: "train", Type: "task", Status: RunRunning, StatusMessage: "running", FleetID: f.gpu.ID, Revision: "r2"}
	other := Run{Project: "other", Name: "train", Type: "task", Status: RunRunning, FleetID: otherGPU.ID}
	for _, r := range []*Run{&f.retired, &f.serve, &f.hello, &other, &f.train} {
		clock.Advance(time.Minute)
		if err := s.CreateRun(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	return f
}

func TestListRunSummaries_filtersNewestFirst(t *testing.T) {
	forEachDB(t, func(t *testing.T, s *Store, clock *fakeClock) {
		fx := seedDashboard(t, s, clock)
		tests := []struct {
			name string
			f    RunSummaryFilter
			want []string
		}{
			{"everything of the project but deleted runs", RunSummaryFilter{}, []string{"train", "hello", "serve"}},
			{"by status", RunSummaryFilter{Status: RunDone}, []string{"hello"}},
			{"by type", RunSummaryFilter{Type: "service"}, []string{"serve"}},
			{"by fleet name", RunSummaryFilter{Fleet: "gpu"}, []string{"train", "hello"}},
			{"by the name of a deleted fleet", RunSummaryFilter{Fleet: "old"}, []string{"serve"}},
			{"by an unknown fleet", RunSummaryFilter{Fleet: "nope"}, []string{}},
			{"filters combine", RunSummaryFilter{Fleet: "gpu", Status: RunDone}, []string{"hello"}},
			{"a page", RunSummaryFilter{Limit: 1, Offset: 1}, []string{"hello"}},
			{"an offset alone", RunSummaryFilter{Offset: 2}, []string{"serve"}},
			{"another project", RunSummaryFilter{Project: "other", Fleet: "gpu"}, []string{"train"}},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				rs, err := s.ListRunSummaries(t.Context(), tt.f)
				if err != nil {
					t.Fatal(err)
				}
				got := []string{}
				for _, r := range rs {
					got = append(got, r.Name)
				}
				if !slices.Equal(got, tt.want) {
					t.Errorf("ListRunSummaries(%+v) = %v, want %v", tt.f, got, tt.want)
				}
			})
		}
		rs, err := s.ListRunSummaries(t.Context(), RunSummaryFilter{Limit: 2})
		if err != nil {
			t.Fatal(err)
		}
		want := []RunSummary{
			{ID: fx.train.ID, Name: "train", Type: "task", Status: RunRunning, StatusMessage: "running", Revision: "r2",
				FleetID: fx.gpu.ID, SubmittedAt: fx.train.SubmittedAt, UpdatedAt: fx.train.UpdatedAt},
			{ID: fx.hello.ID, Name: "hello", Type: "task", Status: RunDone, Revision: "r1",
				FleetID: fx.gpu.ID, SubmittedAt: fx.hello.SubmittedAt, UpdatedAt: fx.hello.UpdatedAt, RemovedFromGit: true},
		}
		if diff := cmp.Diff(want, rs); diff != "" {
			t.Errorf("summaries (-want +got):\n%s", diff)
		}
	})
}

func TestCountRunsByStatus_countsTheProjectsLiveRuns(t *testing.T) {
	forEachDB(t, func(t *testing.T, s *Store, clock *fakeClock) {
		seedDashboard(t, s, clock)
		got, err := s.CountRunsByStatus(t.Context(), "")
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]int{RunRunning: 1, RunDone: 1, RunFailed: 1}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("counts (-want +got):\n%s", diff)
		}
		empty, err := s.CountRunsByStatus(t.Context(), "nobody")
		if err != nil || len(empty) != 0 {
			t.Errorf("CountRunsByStatus(nobody) = %v, %v; want empty", empty, err)
		}
	})
}

func TestFleetNames_includesDeletedFleetsOfTheProject(t *testing.T) {
	forEachDB(t, func(t *testing.T, s *Store, clock *fakeClock) {
		fx := seedDashboard(t, s, clock)
		got, err := s.FleetNames(t.Context(), DefaultProject, []string{fx.gpu.ID, fx.old.ID})
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]string{fx.gpu.ID: "gpu", fx.old.ID: "old"}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("fleet names (-want +got):\n%s", diff)
		}
	})
}

func TestFleetNames_ofTheGivenIDsOnly(t *testing.T) {
	forEachDB(t, func(t *testing.T, s *Store, clock *fakeClock) {
		fx := seedDashboard(t, s, clock)
		for _, tc := range []struct {
			ids  []string
			want map[string]string
		}{
			{[]string{fx.old.ID, "nope"}, map[string]string{fx.old.ID: "old"}},
			{nil, map[string]string{}},
		} {
			got, err := s.FleetNames(t.Context(), DefaultProject, tc.ids)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("fleet names of %v (-want +got):\n%s", tc.ids, diff)
			}
		}
	})
}

func TestRunFleetNames_fleetsOfTheProjectsRunsDeletedFleetsIncluded(t *testing.T) {
	forEachDB(t, func(t *testing.T, s *Store, clock *fakeClock) {
		seedDashboard(t, s, clock)
		if err := s.CreateFleet(t.Context(), &Fleet{Name: "idle", Status: FleetActive}); err != nil {
			t.Fatal(err)
		}
		got, err := s.RunFleetNames(t.Context(), DefaultProject)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff([]string{"gpu", "old"}, got); diff != "" {
			t.Errorf("run fleet names (-want +got):\n%s", diff)
		}
	})
}

func TestListOccupancy_unfinishedJobsOnExistingInstances(t *testing.T) {
	forEachDB(t, func(t *testing.T, s *Store, clock *fakeClock) {
		ctx := t.Context()
		fx := seedDashboard(t, s, clock)
		busy := Instance{Name: "gpu-0", FleetID: fx.gpu.ID, Backend: "local", Status: InstanceBusy, Price: 1.25}
		if err := s.CreateInstance(ctx, &busy); err != nil {
			t.Fatal(err)
		}
		jobs := []Job{
			{RunID: fx.train.ID, RunName: "train", JobName: "train-0-0", Status: JobRunning, InstanceID: busy.ID},
			{RunID: fx.train.ID, RunName: "train", JobName: "train-0-1", Status: JobPulling, InstanceID: busy.ID},
			{RunID: fx.hello.ID, RunName: "hello", JobName: "hello-0-0", Status: JobDone, InstanceID: busy.ID},
			{RunID: fx.serve.ID, RunName: "serve", JobName: "serve-0-0", Status: JobSubmitted},
			{RunID: fx.serve.ID, RunName: "serve", JobName: "serve-0-1", Status: JobRunning, InstanceID: "gone"},
		}
		if err := s.CreateJobs(ctx, jobs); err != nil {
			t.Fatal(err)
		}
		got, err := s.ListOccupancy(ctx)
		if err != nil {
			t.Fatal(err)
		}
		one := Occupancy{RunID: fx.train.ID, InstanceID: busy.ID, InstanceStatus: InstanceBusy, Price: 1.25}
		if diff := cmp.Diff([]Occupancy{one, one}, got); diff != "" {
			t.Errorf("occupancy (-want +got):\n%s", diff)
		}
	})
}

func TestListRecentJobs_unfinishedOrFinishedSince(t *testing.T) {
	forEachDB(t, func(t *testing.T, s *Store, clock *fakeClock) {
		ctx := t.Context()
		fx := seedDashboard(t, s, clock)
		start := clock.Now()
		mk := func(name string, finishedAgo time.Duration) Job {
			t.Helper()
			clock.Advance(time.Minute)
			j := Job{RunID: fx.hello.ID, RunName: "hello", JobName: name, Status: JobRunning}
			if finishedAgo > 0 {
				j.Status, j.FinishedAt = JobDone, start.Add(-finishedAgo)
			}
			if err := s.CreateJob(ctx, &j); err != nil {
				t.Fatal(err)
			}
			return j
		}
		mk("long-ago", time.Hour)
		mk("lately", time.Minute)
		mk("running", 0)
		tests := []struct {
			name  string
			since time.Time
			limit int
			want  []string
		}{
			{"every job, newest first", time.Time{}, 0, []string{"running", "lately", "long-ago"}},
			{"unfinished or finished since", start.Add(-10 * time.Minute), 0, []string{"running", "lately"}},
			{"finished exactly at since", start.Add(-time.Minute), 0, []string{"running", "lately"}},
			{"capped", time.Time{}, 2, []string{"running", "lately"}},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				js, err := s.ListRecentJobs(t.Context(), tt.since, tt.limit)
				if err != nil {
					t.Fatal(err)
				}
				got := []string{}
				for _, j := range js {
					got = append(got, j.JobName)
				}
				if !slices.Equal(got, tt.want) {
					t.Errorf("ListRecentJobs(%v, %d) = %v, want %v", tt.since, tt.limit, got, tt.want)
				}
			})
		}
	})
}
