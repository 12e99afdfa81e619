// Package fake is a backend driver for tests: its instances exist only in
// the test process, each with an in-process shim and, per task, an
// in-process runner that speak the real HTTP APIs of hoist/agents/api over
// loopback (bearer tokens included) but start no containers. A job's
// commands are interpreted by a tiny scripted executor (see Script): `echo`
// prints, `exit N` ends the job, `sleep D` waits, anything else succeeds.
//
// The handlers are written against agents/api rather than reusing
// agents/shim and agents/runner: the shim drives a Docker Engine for every
// task, and the runner runs real processes under a process-wide child
// reaper, with no executor to swap for a script.
//
// Faults are set on the Backend: no capacity, a provisioning delay on the
// injected clock, an unreachable instance, runners that never answer, an
// image that cannot be pulled, a container lost behind the shim's back, and
// Terminate errors. A service port a task publishes answers HTTP with
// Config.Service.
//
// Only tests import it (the reconciler's unit tests, the conformance test);
// it is registered nowhere in cmd/hoist. It imports backends,
// backends/offers, backends/internal/agentauth and agents/api.
package fake
