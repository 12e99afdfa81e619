package api

// StandaloneHome is the standalone runner's directory in the pod, and
// StandaloneSocket its API socket there.
const (
	StandaloneHome   = "/tmp/hoist"
	StandaloneSocket = StandaloneHome + "/runner.sock"
)

// StandaloneOptions are what the start command passes on to the runner.
type StandaloneOptions struct{}

// StandaloneCommand returns the pod's command (placeholder until the
// standalone runner lands).
func StandaloneCommand(StandaloneOptions) []string {
	return []string{"/bin/sh", "-c", "exit 127"}
}
