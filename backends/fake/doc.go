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
// It is a backends.VolumeBackend too: a fake volume is a record in one
// region that attaches to one instance of that region at a time and shows
// up there at DevicePrefix + its provider id; the fake shim fails a task
// whose network volume is not attached to its instance (see volumes.go).
//
// Instance n (from 1, in creation order) reports the internal IP
// 10.0.<n/256>.<n%256>, or none with Config.NoInternalIPs; with a runner
// Runtime, task n (from 1, on the whole backend) reports an address of its
// own, 10.1.<n/256>.<n%256>, as a Kubernetes pod does; the fake runner
// exports the cluster's DSTACK_NODE_RANK, DSTACK_NODES_NUM,
// DSTACK_MASTER_NODE_IP and DSTACK_NODES_IPS to the script.
//
// Faults are set on the Backend: no capacity (for every offer or for one
// instance type), a provisioning delay on the injected clock, an instance
// type that never boots or fails to boot (the cloud engine's boot timeout),
// a spot interruption, an instance the provider lost, an unreachable instance, runners that never answer,
// an image that cannot be pulled, a container lost behind the shim's back,
// and Terminate errors. It implements backends.PlacementBackend: placement
// groups are recorded, an instance created in an unknown one fails, and one
// an instance is in is not deleted. Attempts lists the spec of every Create
// of a new instance, so a test sees which offers were tried. A service
// port a task publishes answers HTTP with Config.Service.
//
// Only tests import it (the reconciler's unit tests, the conformance test);
// it is registered nowhere in cmd/hoist. It imports backends,
// backends/offers, backends/internal/agentauth and agents/api.
package fake
