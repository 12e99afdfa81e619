// Package shim is hoist's host agent: it runs tasks — one Docker container
// each, with the hoist-runner binary bind-mounted in as the entrypoint — on
// the host's Docker Engine, and serves their state over the shim HTTP API
// (package hoist/agents/api).
//
// A task moves pending → preparing → pulling → creating → running →
// terminated (see Transition). Every container the shim creates carries its
// labels, and the task's state is kept under Config.StateDir, so that a
// restarted shim re-attaches to its containers (Recover); containers it finds
// but cannot account for are reported, never killed.
//
// A task's network volumes (TaskSpec.NetworkVolumes: block devices the
// server attached to the host, named by a path below /dev) are mounted under
// StateDir/volumes — formatted ext4 first when blank and created by hoist —
// and bound into the container; they are unmounted once the container has
// exited, so that the server can detach them (volumes.go). This needs root,
// blkid and mkfs.ext4 (e2fsprogs).
//
// A task that asks for a number of NVIDIA GPUs gets GPUs that no other
// live task of the shim holds (Config.GPUs, else the host's as nvidia-smi
// lists them), recorded as its TaskSpec.GPUIDs and kept held across a
// restart; Docker's NVIDIA runtime gives them to the container, or, on a
// host without it, their device nodes are mapped in (gpus.go), from
// Config.DeviceDir (Main: $HOIST_SHIM_DEVICE_DIR, else /dev). Tasks sharing
// a host — a fleet's blocks, the server's own host — so never share a GPU.
// A task with NetworkMode host runs in the host's network namespace, so that
// multi-node jobs reach each other at the hosts' addresses (dstack runs
// cluster jobs with host networking). On a real host the shim shares the
// Docker daemon's namespace and that is Docker's "host" network. A shim in
// another namespace than the daemon it drives (found by comparing its
// namespace with that of the process behind the daemon's Unix socket) is a
// host simulated by a network namespace on a machine with one Engine:
// Docker's "host" would be the wrong host, and Docker cannot start a
// container in a namespace given by path. The shim then starts a holder
// container that joins the shim's namespace (the runner binary's
// --hold-netns mode, with CAP_SYS_ADMIN and the shim's /proc/PID/ns/net
// bound in), creates the task's container with NetworkMode
// "container:<holder>", and removes the holder once that container has
// started (netns.go). A task in bridge mode in such a shim has its ports
// published in the daemon's namespace, not the shim's.
//
// The runner's API has no TCP port: it listens on a Unix socket in its
// directory, which the host sees under StateDir, and TaskInfo.RunnerAddr
// names it ("unix://" and a short path through a 0700 link directory of the
// shim's). Only the shim's user and root can open it; other containers and
// other local users cannot reach it at all.
//
// Both APIs are authenticated: every request to the shim, the health check
// included, carries Config.Token (made by the server for the instance), and
// every request to a runner carries that task's own random token
// (TaskInfo.RunnerToken, handed to the runner in a file of its directory
// that it deletes before it serves: no environment or container setting
// holds it). Anything else gets 401 and a log line.
//
// cmd/hoist-shim and `hoist agent shim` (cmd/hoist) run it through Main;
// backends/local runs it in-process; tests import it too. It imports agents/api
// agents/hostinfo (GET /api/v1/host) and agents/internal/agenthttp, and
// nothing else of hoist.
package shim
