package api

// PodSSHPort is the port a standalone runner (hoist-runner --standalone,
// in a container cloud's pod) serves SSH on, as dstack's runner does in
// RunPod and Vast.ai containers: the one port of the pod the server
// reaches, for the runner API (a direct-streamlocal channel to its Unix
// socket), logs, attach and every port of the job (direct-tcpip).
const PodSSHPort = 10022

// The environment of a standalone runner. A container cloud's engine
// (backends/podcloud) puts these variables in the pod; the start command
// downloads the runner with RunnerEnvURL and RunnerEnvAuth, and the runner
// reads the rest at start and removes every one of them from the
// environment its job sees.
const (
	// RunnerEnvURL is the URL of the hoist-runner binary on the server,
	// valid for this task only.
	RunnerEnvURL = "HOIST_RUNNER_URL"
	// RunnerEnvAuth is the bearer token the download needs (an
	// Authorization header, never part of the URL).
	RunnerEnvAuth = "HOIST_RUNNER_AUTH"
	// RunnerEnvToken is the token every runner API request must carry.
	RunnerEnvToken = "HOIST_RUNNER_TOKEN"
	// RunnerEnvHostKey is the runner's SSH host key, an OpenSSH PEM
	// private key, base64 (standard encoding): the server made it and
	// pins its public half.
	RunnerEnvHostKey = "HOIST_RUNNER_SSH_HOST_KEY"
	// RunnerEnvAuthorizedKeys are the authorized_keys lines (newline
	// separated) the runner's SSH server accepts: the key the server made
	// for the task, and the project's ssh.authorized_keys.
	RunnerEnvAuthorizedKeys = "HOIST_RUNNER_SSH_AUTHORIZED_KEYS"
	// RunnerEnvSSHListen, when set, is the host:port the runner's SSH
	// server listens on instead of 0.0.0.0:PodSSHPort. Providers run each
	// pod in its own network namespace and leave it unset; the cloud
	// simulator runs pods on its host's network and gives each its own
	// loopback address this way.
	RunnerEnvSSHListen = "HOIST_RUNNER_SSH_LISTEN"
)

// ReasonInterrupted is the termination reason of a task whose pod the
// provider reclaimed (an interruptible or outbid container; dstack's job
// termination reason interrupted_by_no_capacity). A run retrying on
// `interruption` is resubmitted.
const ReasonInterrupted = "interrupted_by_no_capacity"
