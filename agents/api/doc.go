// Package api holds the wire types of hoist's two agents — the shim (host agent,
// drives the Docker Engine) and the runner (in-container agent, runs the job) —
// and typed HTTP clients for both.
//
// Every request and response is JSON under /api/v1/ except the health check
// (GET /api/healthcheck, unversioned so that any version can be asked), the
// binary log encoding (see LogFramesContentType), the code's blobs and the
// artifacts' tar (ArtifactsContentType). Every response carries the agent's API
// version in the Hoist-Api-Version header; the clients refuse to talk to an
// agent whose version differs from ShimAPIVersion or RunnerAPIVersion and
// return an error wrapping ErrIncompatibleAgent, so the caller can replace the
// agent.
//
// Both agents refuse request fields they do not know (HTTP 400), so that an
// agent never silently ignores part of a newer server's request: a server
// that sends a field an agent lacks must replace the agent.
//
// The clients take an *http.Client so that the caller may dial through an SSH
// tunnel; every address in this package is as seen from the shim's host.
//
// Every request to either agent, the health check included, carries a bearer
// token in the Authorization header: the shim's is made by the server for the
// instance, each runner's is made by the shim for the task and reported as
// TaskInfo.RunnerToken. Without it an agent answers 401 (ErrUnauthorized).
// WithToken sets it on a client; a backend's Conn adds both kinds itself.
// A runner answers on a Unix socket only (TaskInfo.RunnerAddr is
// "unix:///path"): BaseURL gives its HTTP base URL and UnixDial makes a
// transport dial it, on this machine or through a tunnel.
//
// Shim endpoints (ShimClient):
//
//	GET  /api/healthcheck                 Health
//	GET  /api/v1/host                     HostInfo
//	GET  /api/v1/tasks                    TaskList (tasks and unknown containers)
//	POST /api/v1/tasks                    TaskSpec → TaskInfo (status pending; 409 if the id exists)
//	GET  /api/v1/tasks/{id}               TaskInfo; ?wait_for=<status>&timeout_ms= long-polls
//	POST /api/v1/tasks/{id}/terminate     TerminateRequest → TaskInfo once stopped
//	POST /api/v1/tasks/{id}/remove        409 unless terminated
//	GET  /api/v1/tasks/{id}/logs          the job log left on the host, as log frames
//
// Runner endpoints (RunnerClient):
//
//	GET  /api/healthcheck                 Health
//	POST /api/v1/submit                   JobSpec (repeatable until run)
//	POST /api/v1/code                     CodeManifest → CodeStatus (JobSpec.Code; after submit, before run)
//	POST /api/v1/code/blobs               tar.gz of the missing blobs → CodeStatus
//	POST /api/v1/run                      → RunResponse
//	GET  /api/v1/state                    JobState
//	GET  /api/v1/wait?timeout_ms=         JobState once finished (long-poll)
//	POST /api/v1/stop                     StopRequest → JobState once finished
//	GET  /api/v1/logs?after_seq=|since=&limit=&max_bytes=&wait_ms=&format=frames|ndjson
//	POST /api/v1/logs/ack                 AckRequest → AckResponse (deletes stored records)
//	GET  /api/v1/logs/stream?after_seq=   live JSON lines until the job's end
//	GET  /api/v1/metrics                  Metrics
//	GET  /api/v1/ssh                      Upgrade: ssh → 101, then SSH (DialSSH; see SSHPath)
//	GET  /api/v1/ssh/activity             SSHActivity
//	GET  /api/v1/artifacts?path=&path=    tar of the job's artifacts (see ArtifactsPath; EachArtifact reads it)
//
// Package api imports nothing of hoist. The server (reconciler, backends), the
// shim and the runner import it.
package api
