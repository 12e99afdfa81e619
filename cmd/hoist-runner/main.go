// Command hoist-runner is hoist's in-container agent. The shim bind-mounts
// this static binary into a task's container and makes it the entrypoint; it
// serves the runner HTTP API (package hoist/agents/api) and runs one job.
// `hoist agent runner` runs the same code (runner.Main).
package main

import (
	"context"
	"errors"
	"fmt"
	"os"

	"hoist/agents/runner"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func main() {
	if err := runner.Main(context.Background(), os.Args[1:], version, os.Stdout, os.Stderr); err != nil {
		var ee *runner.ExitError
		if errors.As(err, &ee) {
			os.Exit(ee.Code)
		}
		fmt.Fprintln(os.Stderr, "hoist-runner:", err)
		os.Exit(1)
	}
}
