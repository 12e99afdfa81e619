package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"

	"github.com/spf13/cobra"

	"hoist/agents/runner"
	"hoist/agents/shim"
)

// version is set at build time with -ldflags "-X main.version=..."; the
// agents report it in their health checks.
var version = "dev"

// Program names under which this binary runs an agent directly: the shim
// bind-mounts it into containers as .../hoist-runner (with the runner's flags
// as arguments) and the SSH backend deploys it as bin/hoist-shim and
// bin/hoist-runner, so the hoist binary serves as its own agents.
const (
	shimProgram   = "hoist-shim"
	runnerProgram = "hoist-runner"
)

// agentByName runs an agent when the program was invoked under an agent's
// name; ok is false otherwise.
func agentByName(argv []string) (ok bool, err error) {
	if len(argv) == 0 {
		return false, nil
	}
	switch filepath.Base(argv[0]) {
	case shimProgram:
		return true, runShim(argv[1:])
	case runnerProgram:
		return true, runRunner(argv[1:])
	case gatewayProgram:
		return true, runGatewayArgs(argv[1:])
	}
	return false, nil
}

func runShim(args []string) error {
	// The runner bind-mounted into containers is this binary, unless
	// --runner-binary names another.
	exe, err := os.Executable()
	if err != nil {
		exe = ""
	}
	return shim.Main(context.Background(), args, version, exe, os.Stdout, os.Stderr)
}

func runRunner(args []string) error {
	err := runner.Main(context.Background(), args, version, os.Stdout, os.Stderr)
	var ee *runner.ExitError
	if errors.As(err, &ee) {
		return &exitError{code: ee.Code}
	}
	return err
}

func newAgentCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "agent",
		Short: "Run one of hoist's agents (shim or runner) from this binary",
		Long: `Run one of hoist's agents from this binary. The server deploys this
binary as the agents of hosts of its own architecture: as the shim on SSH
hosts and as the runner inside every job container (there it is invoked as
hoist-runner). The flags are those of cmd/hoist-shim and cmd/hoist-runner.`,
	}
	for _, a := range []struct {
		name, short string
		run         func([]string) error
	}{
		{"shim", "Run the host agent: the shim API and a Docker container per task", runShim},
		{"runner", "Run the in-container agent: the runner API and one job", runRunner},
	} {
		cmd.AddCommand(&cobra.Command{
			Use:                a.name + " [flags]",
			Short:              a.short,
			DisableFlagParsing: true, // the agent parses its own flags
			RunE:               func(_ *cobra.Command, args []string) error { return a.run(args) },
		})
	}
	return cmd
}

// selfAgent returns the running executable when it can serve as the agents
// of a linux/arch host: a Linux binary of that architecture. (A dynamically
// linked one, built with cgo, runs as the local runner through its ELF
// interpreter, see agents/shim; SSH hosts refuse it.)
func selfAgent(arch string) (string, error) {
	build := "run `go tool task build` (hoist with the agents of linux/amd64 and linux/arm64 built in)"
	if runtime.GOOS != "linux" || arch != runtime.GOARCH {
		return "", fmt.Errorf("this hoist is for %s/%s; %s", runtime.GOOS, runtime.GOARCH, build)
	}
	exe, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("find the hoist executable: %w; %s", err, build)
	}
	return exe, nil
}
