package web

import (
	"context"
	"net/http"
	"time"
)

// Services is what the service proxy (/proxy/services, /proxy/models) needs
// of the reconciler: where a service run's ready replicas answer, and a
// replica for a run scaled to zero. cmd/hoist passes the reconciler's
// Controller; nil serves no proxy (404).
type Services interface {
	// Service returns the routing view of the project's service run
	// named run; an error wrapping ErrNotFound when there is none.
	Service(ctx context.Context, project, run string) (Service, error)
	// Models returns the project's service runs that declare a `model`.
	Models(ctx context.Context, project string) ([]Service, error)
	// Wake asks for at least one replica of a service run that has none
	// ready (scale from zero); it returns at once, the proxy waits for
	// Service to list a ready replica.
	Wake(ctx context.Context, project, run string) error
}

// A Service is a service run as the proxy routes to it.
type Service struct {
	// Project and Run name the run.
	Project, Run string
	// Auth requires a token of the project (dstack's `auth`, true by
	// default).
	Auth bool
	// StripPrefix removes /proxy/services/<project>/<run> from the path
	// forwarded (dstack's `strip_prefix`, true by default).
	StripPrefix bool
	// Model is the run's `model`, nil when it declares none.
	Model *ServiceModel
	// RateLimits are the run's `rate_limits`.
	RateLimits []ServiceRateLimit
	// MinReplicas is the low end of `replicas`: 0 means the run scales to
	// zero and a request waits (Wake) while a replica starts.
	MinReplicas int
	// Replicas are the ready replicas: running, and passing their probes.
	Replicas []Replica
}

// A ServiceModel is a service's `model` (dstack's ModelInfo).
type ServiceModel struct {
	// Name is the model's name, matched against a request's `model`.
	Name string
	// Format is "openai" or "tgi".
	Format string
	// Prefix is the path prefix of an openai-format upstream (default
	// /v1).
	Prefix string
	// ChatTemplate (Jinja) renders a chat completion's messages into the
	// prompt of a tgi-format upstream; EOSToken is the model's end of
	// sequence token, a stop sequence of every request. The spec's, or
	// the model's tokenizer_config.json on the Hugging Face Hub.
	ChatTemplate, EOSToken string
}

// A ServiceRateLimit is one of a service's `rate_limits` (dstack's
// RateLimit): requests to Prefix, per client IP or per value of a header.
type ServiceRateLimit struct {
	// Prefix is the path prefix (below the service's URL) it applies to.
	Prefix string
	// Header, when set, keys the limit by that request header's value
	// instead of the client's address (`key: {type: header}`); requests
	// without the header are not limited.
	Header string
	// RPS is the sustained rate allowed, Burst the bucket size.
	RPS   float64
	Burst int
}

// A Replica is one ready replica of a service run.
type Replica struct {
	// JobID is the replica's job.
	JobID string
	// Addr is host:port of the service port as Transport dials it (as
	// seen from the replica's instance).
	Addr string
	// Transport dials through the connection the server holds to the
	// replica's instance (shim tunnel, SSH, port-forward), never a
	// public port.
	Transport http.RoundTripper
}

// TrafficMeter is what the proxy measures of each service run, for the
// reconciler's autoscaling (`scaling: {metric: rps}`).
type TrafficMeter interface {
	// RPS returns the requests per second the proxy forwarded (or held)
	// for the run, averaged over the last window.
	RPS(project, run string, window time.Duration) float64
	// LastRequest returns when the run last got a request (zero when
	// never), for scale-to-zero's scale_down_delay.
	LastRequest(project, run string) time.Time
}

// ServiceStatuses is what the run page and the run API show of a service
// beyond the store: its replicas with their probe state, its requests per
// second, and their recent history. cmd/hoist passes the reconciler's
// view; nil leaves service runs without that section.
type ServiceStatuses interface {
	// ServiceStatus returns the dashboard view of the project's service
	// named run; an error wrapping ErrNotFound when there is none.
	ServiceStatus(ctx context.Context, project, run string) (ServiceStatus, error)
}

// A ServiceStatus is a service as its dashboard shows it.
type ServiceStatus struct {
	// RPS is the requests per second the service got, averaged over
	// RPSWindowSeconds (what its autoscaling reads).
	RPS float64 `json:"rps"`
	// RPSWindowSeconds is the window of RPS: `scaling.window`, or 60.
	RPSWindowSeconds int `json:"rps_window_seconds"`
	// MinReplicas and MaxReplicas are the spec's `replicas` range.
	MinReplicas int `json:"min_replicas"`
	MaxReplicas int `json:"max_replicas"`
	// DesiredReplicas is the replica count wanted now.
	DesiredReplicas int `json:"desired_replicas"`
	// ReadyReplicas is how many replicas receive traffic: running, and
	// passing their probes.
	ReadyReplicas int `json:"ready_replicas"`
	// Replicas are the replicas not finished, of every active run of the
	// service (an older run's during a rolling deployment).
	Replicas []ServiceReplicaStatus `json:"replicas"`
	// History is one sample per HistoryIntervalSeconds over the last
	// hour, oldest first, as this server process saw it (empty after a
	// restart).
	History []ServiceSample `json:"history"`
	// HistoryIntervalSeconds is the interval between History's samples.
	HistoryIntervalSeconds int `json:"history_interval_seconds"`
}

// A ServiceReplicaStatus is one replica of a service.
type ServiceReplicaStatus struct {
	// JobID and JobName name the replica's latest submission.
	JobID   string `json:"job_id"`
	JobName string `json:"job_name"`
	// Revision is the Git revision of the replica's run.
	Revision string `json:"revision,omitempty"`
	// ReplicaNum is the replica's number, SubmissionNum its submission's.
	ReplicaNum    int `json:"replica_num"`
	SubmissionNum int `json:"submission_num"`
	// Status is the job's status.
	Status string `json:"status"`
	// Address is host:port of the service port as seen from the replica's
	// instance; empty until it runs.
	Address string `json:"address,omitempty"`
	// Ready is set when the replica receives traffic from this server's
	// proxy.
	Ready bool `json:"ready"`
	// Probes are the replica's probes, in the spec's order.
	Probes []ProbeStatus `json:"probes"`
}

// A ProbeStatus is one probe of a replica.
type ProbeStatus struct {
	// Method and URL are the probe's request.
	Method string `json:"method"`
	URL    string `json:"url"`
	// Passes is how many times in a row the probe passed.
	Passes int `json:"passes"`
	// ReadyAfter is how many passes in a row make the replica ready.
	ReadyAfter int `json:"ready_after"`
	// LastProbeAt is when the probe last ran, on whichever server
	// (absent when it has not yet).
	LastProbeAt *time.Time `json:"last_probe_at,omitempty"`
	// LastOK is the result of that run (absent with LastProbeAt).
	LastOK *bool `json:"last_ok,omitempty"`
}

// A ServiceSample is a service's traffic and replica count at one time.
type ServiceSample struct {
	At              time.Time `json:"at"`
	RPS             float64   `json:"rps"`
	Replicas        int       `json:"replicas"`
	DesiredReplicas int       `json:"desired_replicas"`
}
