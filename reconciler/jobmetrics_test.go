package reconciler

import (
	"testing"
	"time"

	"hoist/agents/api"
	"hoist/store"
)

const idleGPUTask = `type: task
name: idle
image: busybox
commands: [train]
utilization_policy:
  min_gpu_utilization: 10
  time_window: 5m
`

// TestRecordMetrics_utilizationPolicy feeds recorded samples (one every
// 10 s, two GPUs) of a running job whose run has utilization_policy
// {min_gpu_utilization: 10, time_window: 5m} and checks dstack's rule: the
// job is terminated once one GPU stayed under 10% in every sample of the
// last five minutes, not before the window is covered, never without GPUs.
func TestRecordMetrics_utilizationPolicy(t *testing.T) {
	busy := func(i int) []api.GPUMetrics {
		return []api.GPUMetrics{{Index: 0, UtilPercent: 95}, {Index: 1, UtilPercent: 90}}
	}
	tests := []struct {
		name string
		// gpus gives the GPUs of sample i (taken at i*10 s).
		gpus      func(i int) []api.GPUMetrics
		samples   int
		terminate bool
	}{
		{"one idle GPU for the whole window terminates", func(i int) []api.GPUMetrics {
			return []api.GPUMetrics{{Index: 0, UtilPercent: 95}, {Index: 1, UtilPercent: 3}}
		}, 31, true},
		{"an idle GPU before the window is covered does not terminate yet", func(i int) []api.GPUMetrics {
			return []api.GPUMetrics{{Index: 0, UtilPercent: 0}}
		}, 24, false},
		{"one sample at the minimum in the window keeps the job", func(i int) []api.GPUMetrics {
			if i == 20 {
				return []api.GPUMetrics{{Index: 0, UtilPercent: 10}}
			}
			return []api.GPUMetrics{{Index: 0, UtilPercent: 2}}
		}, 31, false},
		{"busy GPUs keep the job", busy, 40, false},
		{"a job without GPUs is never terminated", func(int) []api.GPUMetrics { return nil }, 40, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, map[string]string{"idle.dstack.yml": idleGPUTask})
			if res := f.sync(); res != resultSynced {
				t.Fatalf("sync = %s", res)
			}
			job := latestSubmissions(f.jobs(f.run("idle").ID))[0]
			job.Status = store.JobRunning
			if err := f.st.UpdateJob(f.ctx, &job); err != nil {
				t.Fatal(err)
			}
			spec, err := decodeRunSpec(job.Spec)
			if err != nil {
				t.Fatal(err)
			}
			l, ok, err := f.c.claim(f.ctx, "jobs", job.ID)
			if err != nil || !ok {
				t.Fatalf("claim job: %v %v", ok, err)
			}
			defer f.c.release(l)
			stopped := -1
			for i := range tt.samples {
				if i > 0 {
					f.clock.Advance(10 * time.Second)
				}
				m := api.Metrics{Time: f.clock.Now(), CPUUsageMicros: int64(i) * 1e6, GPUs: tt.gpus(i)}
				stop, err := f.c.recordMetrics(f.ctx, l, job, spec, m)
				if err != nil {
					t.Fatal(err)
				}
				if stop {
					stopped = i
					break
				}
			}
			got, err := f.st.GetJob(f.ctx, job.ID)
			if err != nil {
				t.Fatal(err)
			}
			if !tt.terminate {
				if stopped >= 0 || got.Status != store.JobRunning {
					t.Fatalf("job %s (%s) after sample %d; want it running", got.Status, got.TerminationReason, stopped)
				}
				return
			}
			// The window (300 s) is covered by sample 30 (the oldest at 0 s);
			// dstack accepts an oldest sample up to a minute late: 300-60 = 240 s.
			if stopped != 24 {
				t.Fatalf("terminated at sample %d, want 24 (window less dstack's one minute of slack)", stopped)
			}
			if got.Status != store.JobTerminating || got.TerminationReason != "terminated_due_to_utilization_policy" ||
				got.TerminationMessage != "The job GPU utilization below 10% for 300 seconds" {
				t.Fatalf("job = %s %q %q; want terminating, terminated_due_to_utilization_policy, dstack's message", got.Status, got.TerminationReason, got.TerminationMessage)
			}
		})
	}
}
