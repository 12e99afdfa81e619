package reconciler

import (
	"strings"
	"testing"

	"hoist/agents/api"
	"hoist/backends/fake"
	"hoist/store"
)

// TestWorkers_jobsThatCannotStartFailWithTheAgentsReason: a job whose task
// cannot start fails with the reason its shim or the server gives, its task
// removed and its instance free again.
func TestWorkers_jobsThatCannotStartFailWithTheAgentsReason(t *testing.T) {
	for _, tc := range []struct {
		name, task, reason, msg string
		fault                   func(be *fake.Backend)
	}{
		{
			name:   "the image cannot be pulled",
			task:   "type: task\nname: train\nimage: registry.invalid/nope:1\ncommands: [echo hi]\n",
			reason: api.ReasonImagePullError, msg: "manifest unknown",
			fault: func(be *fake.Backend) { be.SetPullError("registry.invalid/nope:1", "manifest unknown") },
		},
		{
			name:   "no image and no default image",
			task:   "type: task\nname: train\ncommands: [echo hi]\n",
			reason: reasonCreatingContainer, msg: "the spec names no image and no default image is configured",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, map[string]string{"fleet.dstack.yml": cloudFleet, "task.dstack.yml": tc.task})
			be := f.withFakeBackend(fake.Config{})
			if tc.fault != nil {
				tc.fault(be)
			}
			f.sync()
			inst := f.provision("train")
			j := f.stepJob("train", store.JobFailed)
			if j.TerminationReason != tc.reason || !strings.Contains(j.TerminationMessage, tc.msg) {
				t.Errorf("job failed for %s %q, want %s %q", j.TerminationReason, j.TerminationMessage, tc.reason, tc.msg)
			}
			if got := be.Tasks(inst.ID); len(got) != 0 {
				t.Errorf("shim keeps tasks %v, want none", got)
			}
			if got := f.instance(inst.ID); got.Status != store.InstanceIdle {
				t.Errorf("instance = %s, want idle again", got.Status)
			}
		})
	}
}
