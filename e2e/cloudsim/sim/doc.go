// Package sim is the core of the cloud simulator (e2e/cloudsim): the
// resources every simulated provider keeps (instances, volumes, placement
// groups, ...), the "VMs" it boots, fault injection, spot interruptions, the
// admin API under /_sim/, and state that survives a restart.
//
// A VM (Boot) gets its own address in 127.77.0.0/16 and an OpenSSH sshd on
// port 22 accepting only the keys the driver injected (Resource.AuthorizedKeys
// and the ssh_authorized_keys of #cloud-config user data), for
// Resource.User; its ed25519 host key is kept under the state directory and
// shown in Resource.HostKeys (the console output). Every session on it
// carries CLOUDSIM_VM in its environment, so that Halt kills what was
// started there along with sshd. Because VMs listen on port 22, the
// simulator runs as root.
//
// A pod (StartPod, for the container clouds RunPod and Vast.ai) is a Docker
// container of the job's image on the host network, with its own address in
// 127.77.0.0/16 too, told where to listen by HOIST_RUNNER_SSH_LISTEN. Its
// container is labeled hoist.cloudsim=<state directory> and
// hoist.cloudsim.pod=<provider>/<id>; it outlives the Sim (Close), so that a
// simulator started again over the same state directory finds it, and
// RemoveAllPods removes them all (testenv.StartCloudSim does when the test
// ends). An image that cannot be pulled, or a container that cannot start,
// is the pod's failure (PodState.Message), not StartPod's error.
//
// Faults (POST /_sim/faults) are one object, replaced as a whole:
// error_rate (the share of calls Call or Inject fails), error_kinds (how
// those failures are shared among transient server errors, throttling,
// capacity errors on creates, timeouts, and lost answers of calls that
// were carried out; throttling alone by default), hold_ms (how long a
// timeout or lost call keeps its connection before closing it unanswered),
// latency_ms (added to every call), capacity (instances of a type that may
// still be created, counted down by Take; a type not named is unlimited)
// and stuck (instances of a type whose VM will never boot, counted down by
// Boot). Faults are not kept across a restart.
//
// The admin API (Serve, on the --listen address): GET /_sim/instances
// (every resource ever created, oldest first), GET and POST /_sim/faults,
// GET /_sim/stats (API calls by provider and operation, and those failed on
// purpose, by operation and by fault kind), POST /_sim/interrupt?id=ID[&provider=P] (the provider's
// Interrupt), GET /_sim/backend/<provider> (a hoist server-config backend
// entry for that provider's endpoint).
//
// State: every change of a resource rewrites state.json in the state
// directory atomically; New reloads it and boots again the VMs that were
// pending or running, on their addresses with their host keys (those that
// were stopping are terminated). Serve keeps
// its listeners' ports in listeners.json and takes them again when free, and
// the https CA in ca.pem and ca-key.pem, so that a restarted simulator has
// the same URLs and is still trusted.
//
// Provider packages (e2e/cloudsim/ec2, gce, arm) speak one provider's wire
// format over it; the cloudsim command and e2e/testenv (StartCloudSim) wire
// them together. It is test support: nothing of the daemon imports it.
package sim
