package reconciler

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/robfig/cron/v3"

	"hoist/schema"
)

// runSpec is the part of a normalized run spec (task, service or dev
// environment) the workers act on, decoded from its canonical JSON.
type runSpec struct {
	Type string `json:"type"`
	schema.RunConfig
	Commands []string             `json:"commands"`
	Ports    []schema.PortMapping `json:"ports"`
	Port     *schema.PortMapping  `json:"port"`
	Probes   []schema.Probe       `json:"probes"`
	Nodes    int                  `json:"nodes"`
	// Groups are a heterogeneous multi-node task's node groups (Nodes is
	// then 0); forJob gives the part of them one job runs.
	Groups   []schema.NodeGroup `json:"groups"`
	Replicas *schema.Range      `json:"replicas"`
	// A dev environment's init commands, IDE, the version of the IDE's
	// server to install, and the seconds without SSH connections after
	// which it stops (0: never) (schema.DevEnvironment).
	Init               []string `json:"init"`
	IDE                string   `json:"ide"`
	Version            string   `json:"version"`
	InactivityDuration int64    `json:"inactivity_duration"`
	// A service's routing and scaling (schema.Service).
	Auth        bool               `json:"auth"`
	StripPrefix bool               `json:"strip_prefix"`
	Model       *schema.Model      `json:"model"`
	Scaling     *schema.Scaling    `json:"scaling"`
	RateLimits  []schema.RateLimit `json:"rate_limits"`
	// Gateway and HTTPS choose the gateway serving a service and whether
	// it serves it over TLS (schema.Service).
	Gateway *schema.GatewayRef `json:"gateway"`
	HTTPS   string             `json:"https"`
	// A workflow's provider, parameters, program and generated jobs
	// (schema.Workflow).
	Provider  *schema.WorkflowProvider `json:"provider"`
	Params    json.RawMessage          `json:"params"`
	Program   *schema.ProviderProgram  `json:"program"`
	InputHash string                   `json:"input_hash"`
	Jobs      []schema.WorkflowJob     `json:"jobs"`
}

func decodeRunSpec(b []byte) (runSpec, error) {
	var s runSpec
	if err := json.Unmarshal(b, &s); err != nil {
		return s, fmt.Errorf("decode run spec: %w", err)
	}
	return s, nil
}

type jobNum struct{ job, replica int }

// jobNums lists the jobs a new submission of the run has: one per node for
// tasks, replicas.min (at least one) for services, one for dev environments.
func (s runSpec) jobNums() []jobNum {
	switch schema.Kind(s.Type) {
	case schema.KindTask:
		n := s.nodeCount()
		out := make([]jobNum, n)
		for i := range out {
			out[i] = jobNum{job: i}
		}
		return out
	case schema.KindWorkflow:
		if len(s.Jobs) == 0 {
			return []jobNum{{}} // the provider's program
		}
		off := s.jobOffset()
		out := make([]jobNum, len(s.Jobs))
		for i := range out {
			out[i] = jobNum{job: i + off}
		}
		return out
	case schema.KindService:
		n := 1
		if s.Replicas != nil && s.Replicas.Min != nil {
			n = int(*s.Replicas.Min)
		}
		out := make([]jobNum, n)
		for i := range out {
			out[i] = jobNum{replica: i}
		}
		return out
	default:
		return []jobNum{{}}
	}
}

// nodeCount is the number of nodes (jobs of a replica) of a task: the sum
// of its groups' nodes, else its nodes (at least 1); 1 for other kinds.
func (s runSpec) nodeCount() int {
	if schema.Kind(s.Type) != schema.KindTask {
		return 1
	}
	if len(s.Groups) > 0 {
		n := 0
		for _, g := range s.Groups {
			n += g.Nodes
		}
		return n
	}
	return max(s.Nodes, 1)
}

// nodeGroup returns the index of the group whose node job jobNum is, and
// the node's index within that group: job numbers run through group 0's
// nodes, then group 1's, and so on (dstack's
// server/services/jobs/configurators/task.py, get_job_specs). ok is false
// for a spec without groups and a job number past its nodes.
func (s runSpec) nodeGroup(jobNum int) (group, index int, ok bool) {
	for i, g := range s.Groups {
		if jobNum < g.Nodes {
			return i, jobNum, jobNum >= 0
		}
		jobNum -= g.Nodes
	}
	return 0, 0, false
}

// forJob returns the spec job jobNum runs: for a task with groups, its
// group's commands, resources and ports (a group's resources do not
// inherit the task's; dstack's configurators/base.py, _requirements); for
// a workflow, the generated job's or the provider's program
// (forWorkflowJob); for any other spec, s itself. The groups stay, so that forJob of the result
// gives any other job's.
func (s runSpec) forJob(jobNum int) runSpec {
	if schema.Kind(s.Type) == schema.KindWorkflow {
		return s.forWorkflowJob(jobNum)
	}
	g, _, ok := s.nodeGroup(jobNum)
	if !ok {
		return s
	}
	s.Commands, s.Resources, s.Ports = s.Groups[g].Commands, s.Groups[g].Resources, s.Groups[g].Ports
	return s
}

// script returns the commands the job runs: a task's and a service's
// commands; a dev environment's init followed by a wait forever, so that it
// stays up for users to attach.
func (s runSpec) script() []string {
	if schema.Kind(s.Type) == schema.KindDevEnvironment {
		return append(append([]string{}, s.Init...), "while true; do sleep 3600; done")
	}
	return s.Commands
}

// retryOn reports whether the retry policy covers event within its
// duration since submittedAt.
func (s runSpec) retryOn(event string, submittedAt, now time.Time) bool {
	if s.Retry == nil {
		return false
	}
	if s.Retry.Duration > 0 && now.Sub(submittedAt) > time.Duration(s.Retry.Duration)*time.Second {
		return false
	}
	for _, e := range s.Retry.OnEvents {
		if e == event {
			return true
		}
	}
	return false
}

// nextCron returns the earliest next fire time of the cron expressions.
func nextCron(exprs []string, now time.Time) (time.Time, error) {
	var next time.Time
	for _, e := range exprs {
		sch, err := cron.ParseStandard(e)
		if err != nil {
			return time.Time{}, fmt.Errorf("schedule %q: %w", e, err)
		}
		t := sch.Next(now.UTC())
		if next.IsZero() || t.Before(next) {
			next = t
		}
	}
	return next, nil
}

// retryBackoff is dstack's pending-run resubmission back-off by attempt.
var retryBackoff = []time.Duration{15 * time.Second, 30 * time.Second, time.Minute, 2 * time.Minute, 5 * time.Minute, 10 * time.Minute}

func backoffFor(attempt int) time.Duration {
	if attempt < 0 {
		attempt = 0
	}
	if attempt >= len(retryBackoff) {
		return retryBackoff[len(retryBackoff)-1]
	}
	return retryBackoff[attempt]
}
