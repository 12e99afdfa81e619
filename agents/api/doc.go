// Package api holds the wire types of hoist's two agents — the shim (host agent,
// drives the Docker Engine) and the runner (in-container agent, runs the job) —
// and typed HTTP clients for both.
//
// Every request and response is JSON under /api/v1/ except the health check
// (GET /api/healthcheck, unversioned so that any version can be asked) and the
// binary log stream (see LogFrame). Every response carries the agent's API
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
// Package api imports nothing of hoist. The server (reconciler, backends), the
// shim and the runner import it.
package api
