// Command hoist-shim is hoist's host agent: it serves the shim HTTP API
// (package hoist/agents/api) and runs each task as a Docker container whose
// entrypoint is the hoist-runner binary. `hoist agent shim` runs the same
// code (shim.Main).
package main

import (
	"context"
	"fmt"
	"os"

	"hoist/agents/shim"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func main() {
	if err := shim.Main(context.Background(), os.Args[1:], version, "", os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "hoist-shim:", err)
		os.Exit(1)
	}
}
