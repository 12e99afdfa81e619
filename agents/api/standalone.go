package api

import (
	"encoding/json"
	"strings"
)

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

// StandaloneHome is a standalone runner's directory in the pod when the
// image sets no TMPDIR (the start command uses ${TMPDIR:-/tmp}/hoist), and
// StandaloneSocket the path under which the server reaches its API: a
// direct-streamlocal@openssh.com channel to it, on the runner's SSH port,
// reaches the runner's API socket wherever the start command put it, and
// opens whatever the job's state: before a job is submitted and after it
// ended, while the runner lingers.
const (
	StandaloneHome   = "/tmp/hoist"
	StandaloneSocket = StandaloneHome + "/runner.sock"
)

// StandaloneOptions are what a standalone runner's start command passes
// it from the job's image, when the engine knows them.
type StandaloneOptions struct {
	// ImageCommand is the image's entrypoint followed by its cmd, which a
	// job without commands runs (the runner's --image-command).
	ImageCommand []string
	// ImageWorkDir is the image's WORKDIR, the job's default working dir
	// (the runner's --image-workdir).
	ImageWorkDir string
}

// StandaloneCommand returns the command of a container cloud's pod:
// /bin/sh -c and a POSIX sh script (busybox's ash runs it) that makes the
// directory ${TMPDIR:-/tmp}/hoist (StandaloneHome), downloads the runner
// from RunnerEnvURL with the header "Authorization: Bearer" RunnerEnvAuth
// (with curl, or else wget, which busybox has; an image with neither gets
// curl from its package manager, apt-get, dnf, yum or apk, as dstack's
// get_docker_commands does), and execs it as
//
//	hoist-runner --standalone --home DIR --socket DIR/runner.sock
//
// with o's options. The download's variables are unset before: the
// runner's process keeps no trace of them. When neither curl nor wget is
// there and cannot be installed, or the download fails, the script says so
// on stderr (the provider's log of the pod) and exits 127.
func StandaloneCommand(o StandaloneOptions) []string {
	var b strings.Builder
	b.WriteString(`d="${TMPDIR:-/tmp}/hoist"
fail() { echo "hoist: $*" >&2; exit 127; }
[ -n "${` + RunnerEnvURL + `:-}" ] || fail "` + RunnerEnvURL + ` is not set: there is no runner to download"
url="${` + RunnerEnvURL + `%%\?*}"
rm -rf "$d" && mkdir -p "$d" || fail "cannot create the directory $d"
b="$d/hoist-runner"
auth="Authorization: Bearer ${` + RunnerEnvAuth + `:-}"
if ! command -v curl >/dev/null 2>&1 && ! command -v wget >/dev/null 2>&1; then
	echo "hoist: the image has neither curl nor wget: installing curl" >&2
	if command -v apt-get >/dev/null 2>&1; then
		{ apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends curl ca-certificates; } >&2
	elif command -v dnf >/dev/null 2>&1; then
		dnf install -y -q curl >&2
	elif command -v yum >/dev/null 2>&1; then
		yum install -y -q curl >&2
	elif command -v apk >/dev/null 2>&1; then
		apk add --no-cache curl >&2
	fi
fi
if command -v curl >/dev/null 2>&1; then
	curl -fsS --retry 3 -H "$auth" -o "$b" "$` + RunnerEnvURL + `" || fail "downloading hoist-runner from $url with curl failed"
elif command -v wget >/dev/null 2>&1; then
	wget -q --header "$auth" -O "$b" "$` + RunnerEnvURL + `" || fail "downloading hoist-runner from $url with wget failed"
else
	fail "the image has neither curl nor wget: cannot download hoist-runner from $url"
fi
chmod +x "$b" || fail "chmod +x $b failed"
unset ` + RunnerEnvURL + ` ` + RunnerEnvAuth + ` auth
exec "$b" --standalone --home "$d" --socket "$d/runner.sock"`)
	if len(o.ImageCommand) > 0 {
		cmd, _ := json.Marshal(o.ImageCommand) // a []string always marshals
		b.WriteString(" --image-command " + shellQuote(string(cmd)))
	}
	if o.ImageWorkDir != "" {
		b.WriteString(" --image-workdir " + shellQuote(o.ImageWorkDir))
	}
	b.WriteString("\n")
	return []string{"/bin/sh", "-c", b.String()}
}

// shellQuote quotes s as one word of a POSIX shell: in single quotes, each
// single quote of s closing the quotes, escaped, and opening them again.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// ReasonInterrupted is the termination reason of a task whose pod the
// provider reclaimed (an interruptible or outbid container; dstack's job
// termination reason interrupted_by_no_capacity). A run retrying on
// `interruption` is resubmitted.
const ReasonInterrupted = "interrupted_by_no_capacity"
