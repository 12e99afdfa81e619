package api

import (
	"errors"
	"fmt"
	"net/http"
)

// Versions of the agents' HTTP APIs. Bump one on a breaking change of that
// agent's API; the clients refuse an agent that reports a different version.
const (
	// ShimAPIVersion is the version of the shim's HTTP API. Version 2: every
	// request, the health check included, carries the shim's bearer token.
	// Version 3: TaskInfo.RunnerAddr is the runner's Unix socket
	// ("unix:///path"), no longer a TCP address. Version 4:
	// TaskSpec.NetworkVolumes (an older shim would run the job without its
	// volume). Version 5: NetworkVolume.ReadOnly and Claim (an older shim
	// would mount a read-only volume writable).
	ShimAPIVersion = 5
	// RunnerAPIVersion is the version of the runner's HTTP API. Version 2:
	// every request, the health check included, carries the runner's bearer
	// token. Version 3: the runner listens on a Unix socket only (or, in a
	// Kubernetes pod, on the pod's loopback: hoist-runner --listen).
	// Version 4: JobSpec.Code and POST /api/v1/code (an older runner would
	// run the job without its code). Version 5: SSH into the job
	// (SSHPath), JobSpec.AuthorizedKeys and IDE, and code delivered by
	// manifest and missing blobs (an older runner would refuse an attach
	// and run a dev environment without its IDE server). Version 6:
	// JobSpec.RunID and Cluster, dstack's cluster environment (an older
	// runner would run a multi-node job without DSTACK_MASTER_NODE_IP,
	// DSTACK_NODES_IPS and the MPI hostfile its nodes need to find each
	// other). Version 7: ClusterInfo.SSHKey, SSH between a cluster's
	// nodes on ClusterSSHPort (an older runner would leave mpirun's ssh
	// to the other nodes without a server or a key). Version 8: GET
	// ArtifactsPath, a job's artifacts (an older runner would lose them).
	RunnerAPIVersion = 8
)

// Service names reported by the agents' health checks.
const (
	// ShimService is the service name the shim reports in Health.
	ShimService = "hoist-shim"
	// RunnerService is the service name the runner reports in Health.
	RunnerService = "hoist-runner"
)

// APIVersionHeader is the response header in which both agents report their
// API version on every response.
const APIVersionHeader = "Hoist-Api-Version"

// HealthPath is the unversioned path of both agents' health checks.
const HealthPath = "/api/healthcheck"

// Health is the answer of an agent's health check.
type Health struct {
	// Service is ShimService or RunnerService.
	Service string `json:"service"`
	// Version is the agent binary's version (a release tag or "dev").
	Version string `json:"version"`
	// APIVersion is the agent's HTTP API version.
	APIVersion int `json:"api_version"`
}

// ErrIncompatibleAgent is wrapped by every client error caused by an agent
// whose service or API version does not match this package's.
var ErrIncompatibleAgent = errors.New("incompatible agent")

// ErrNotFound is wrapped by client errors for a 404 answer (unknown task).
var ErrNotFound = errors.New("not found")

// ErrUnauthorized is wrapped by client errors for a 401 answer: the request
// carried no token or a wrong one.
var ErrUnauthorized = errors.New("unauthorized")

// ErrConflict is wrapped by client errors for a 409 answer: the request does
// not fit the current state (task id exists, task not terminated, job already
// running, ...).
var ErrConflict = errors.New("conflict")

// Error is the JSON body of every non-2xx answer, and the error the clients
// return for one. It matches ErrNotFound and ErrConflict with errors.Is.
type Error struct {
	// Status is the HTTP status code (not sent on the wire).
	Status int `json:"-"`
	// Message says what went wrong.
	Message string `json:"error"`
}

// Error implements error.
func (e *Error) Error() string {
	return fmt.Sprintf("agent: %s (http %d)", e.Message, e.Status)
}

// Is lets errors.Is match ErrNotFound, ErrConflict and ErrUnauthorized by
// status code.
func (e *Error) Is(target error) bool {
	switch target {
	case ErrNotFound:
		return e.Status == http.StatusNotFound
	case ErrConflict:
		return e.Status == http.StatusConflict
	case ErrUnauthorized:
		return e.Status == http.StatusUnauthorized
	}
	return false
}

// IncompatibleError describes an agent of the wrong service or API version.
// It wraps ErrIncompatibleAgent.
type IncompatibleError struct {
	// Service is the expected service name.
	Service string
	// Want is the API version this package speaks.
	Want int
	// Got is the API version the agent reported (0 when it reported none).
	Got int
	// Detail says what else was wrong, if anything.
	Detail string
}

// Error implements error.
func (e *IncompatibleError) Error() string {
	if e.Detail != "" {
		return fmt.Sprintf("incompatible agent: %s: %s", e.Service, e.Detail)
	}
	return fmt.Sprintf("incompatible agent: %s speaks api version %d, this server needs %d; replace the agent", e.Service, e.Got, e.Want)
}

// Unwrap returns ErrIncompatibleAgent.
func (e *IncompatibleError) Unwrap() error { return ErrIncompatibleAgent }
