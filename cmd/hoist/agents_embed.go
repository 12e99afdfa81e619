//go:build embedagents

package main

import (
	"embed"
	"io/fs"
)

// embeddedAgents holds the agent binaries `go tool task build` put into
// cmd/hoist/agents before building hoist with -tags embedagents, so that a
// user installs one file.
//
//go:embed agents/hoist-*
var embeddedAgentFiles embed.FS

func embeddedAgents() fs.FS {
	sub, err := fs.Sub(embeddedAgentFiles, "agents")
	if err != nil {
		return nil
	}
	return sub
}
