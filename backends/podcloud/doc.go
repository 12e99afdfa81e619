// Package podcloud is the engine of the container clouds (dstack's
// dockerized=false backends: RunPod, Vast.ai): the provider runs the job's
// own image, hoist's runner is fetched into it at start, and the server
// reaches that runner over SSH on the one port the pod exposes.
//
// A driver implements Provider (the few calls that differ between clouds)
// and builds its backends.Backend with New. The engine:
//
//   - Create records the instance (its offer and tags) in backends.Records:
//     nothing exists at the provider until a task runs, as on Kubernetes;
//   - Connect answers the shim API (agents/api) inside the server: each task
//     is one pod of the provider, started with the job's image and a start
//     command (StartCommand) that downloads hoist-runner from the server
//     through a per-task, signed URL (backends.Deps.RunnerDownload) and runs
//     it with --standalone;
//   - the runner serves SSH on api.PodSSHPort, accepting only the key the
//     engine made for the task, and its API on a Unix socket in the pod;
//     the Conn's HTTP client reaches the runner (and every port of the pod,
//     for services and probes) through that SSH connection, never over
//     plain HTTP on a public port; the runner's host key is the one the
//     engine gave it, pinned;
//   - a pod the provider reports exited or gone ends its task with the
//     provider's reason; a reclaimed (interruptible) pod ends it as
//     api.ReasonInterrupted, which a run retrying on `interruption`
//     resubmits;
//   - a Provider that is also a VolumeProvider (RunPod) makes the backend
//     a backends.VolumeBackend: a network volume is not attached to a
//     machine but given to the task's pod at creation (PodSpec.Volumes):
//     AttachVolume checks the volume is in the instance's region and
//     returns the provider's volume id as VolumeAttachment.Claim, which
//     the task's api.NetworkVolume carries back; the engine keeps the
//     volumes' tags in backends.Records (their name is all the provider
//     keeps).
//
// Drivers import this package and their provider's client; the reconciler
// never imports it (it sees backends.Backend and backends.Connector).
package podcloud
