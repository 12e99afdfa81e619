package podcloud

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"hoist/agents/api"
	"hoist/backends"
	"hoist/backends/offers"
)

// taskRecordPrefix starts the record ids of tasks, kept beside the
// instances' records in backends.Records.
const taskRecordPrefix = "task/"

// An instanceRecord is what Create reserved: nothing exists at the provider
// until a task runs.
type instanceRecord struct {
	ID        string            `json:"id"`
	Offer     offers.Offer      `json:"offer"`
	Tags      map[string]string `json:"tags"`
	CreatedAt time.Time         `json:"created_at"`
	// Interrupted is set once the provider reclaimed one of the
	// instance's pods: the instance is then described as terminated and
	// Interrupted, and its fleet provisions anew.
	Interrupted bool   `json:"interrupted,omitempty"`
	Message     string `json:"message,omitempty"`
}

// A taskRecord is one task: its pod and the secrets the server made for it
// (records are encrypted at rest), kept so that any server, or this one
// after a restart, reaches the pod's runner.
type taskRecord struct {
	ID       string `json:"id"`
	Instance string `json:"instance"`
	PodName  string `json:"pod_name"`
	// PodID is the provider's id, set once CreatePod answered;
	// PodDeleted once the pod was deleted (TerminatePod answered).
	PodID      string `json:"pod_id,omitempty"`
	PodDeleted bool   `json:"pod_deleted,omitempty"`
	Image      string `json:"image"`
	// Ports are the job's container ports (PodSSHPort not included).
	Ports []int `json:"ports,omitempty"`
	// Volumes are the network volumes the pod is created with (kept so
	// that a pod created again after a lost create mounts them too).
	Volumes []PodVolume `json:"volumes,omitempty"`
	// RunnerToken is the runner API's bearer token.
	RunnerToken string `json:"runner_token"`
	// HostKey is the runner's SSH host key, which the pod gets and whose
	// public half the server pins; ClientKey is the server's key, whose
	// public half the runner authorizes. Both are OpenSSH PEM private keys.
	HostKey   string    `json:"host_key"`
	ClientKey string    `json:"client_key"`
	CreatedAt time.Time `json:"created_at"`
	// End is set once the task is terminated: how it ended, kept after
	// the pod is gone.
	End *taskEnd `json:"end,omitempty"`
}

// A taskEnd is how a task ended.
type taskEnd struct {
	Reason   string        `json:"reason"`
	Message  string        `json:"message,omitempty"`
	ExitCode *int          `json:"exit_code,omitempty"`
	Job      *api.JobState `json:"job,omitempty"`
	At       time.Time     `json:"at"`
}

func (b *Backend) getRecord(ctx context.Context, id string, v any) (bool, error) {
	raw, ok, err := b.records.GetBackendRecord(ctx, b.name, id)
	if err != nil || !ok {
		if err != nil {
			err = backends.Transient(fmt.Errorf("%s backend %q: record %s: %w", b.kind, b.name, id, err))
		}
		return false, err
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return false, fmt.Errorf("%s backend %q: record %s: %w", b.kind, b.name, id, err)
	}
	return true, nil
}

func (b *Backend) putRecord(ctx context.Context, id string, v any) error {
	raw, err := json.Marshal(v)
	if err != nil {
		return err
	}
	if err := b.records.PutBackendRecord(ctx, b.name, id, raw); err != nil {
		return backends.Transient(fmt.Errorf("%s backend %q: record %s: %w", b.kind, b.name, id, err))
	}
	return nil
}

func (b *Backend) deleteRecord(ctx context.Context, id string) error {
	if err := b.records.DeleteBackendRecord(ctx, b.name, id); err != nil {
		return backends.Transient(fmt.Errorf("%s backend %q: record %s: %w", b.kind, b.name, id, err))
	}
	return nil
}

func (b *Backend) instanceRecord(ctx context.Context, id string) (instanceRecord, bool, error) {
	var r instanceRecord
	ok, err := b.getRecord(ctx, id, &r)
	return r, ok, err
}

func (b *Backend) taskRecord(ctx context.Context, id string) (taskRecord, bool, error) {
	var r taskRecord
	ok, err := b.getRecord(ctx, taskRecordPrefix+id, &r)
	return r, ok, err
}

func (b *Backend) putTask(ctx context.Context, r taskRecord) error {
	return b.putRecord(ctx, taskRecordPrefix+r.ID, r)
}

// allRecords lists the instance records and the task records of the backend.
func (b *Backend) allRecords(ctx context.Context) (map[string]instanceRecord, []taskRecord, error) {
	all, err := b.records.ListBackendRecords(ctx, b.name)
	if err != nil {
		return nil, nil, backends.Transient(fmt.Errorf("%s backend %q: records: %w", b.kind, b.name, err))
	}
	insts := map[string]instanceRecord{}
	var tasks []taskRecord
	for id, raw := range all {
		if strings.HasPrefix(id, taskRecordPrefix) {
			var t taskRecord
			if json.Unmarshal(raw, &t) != nil {
				b.log.Warn("record_unreadable", "record", id)
				continue
			}
			tasks = append(tasks, t)
			continue
		}
		var r instanceRecord
		if json.Unmarshal(raw, &r) != nil {
			b.log.Warn("record_unreadable", "record", id)
			continue
		}
		insts[id] = r
	}
	return insts, tasks, nil
}
