//go:build !embedagents

package main

import "io/fs"

// embeddedAgents returns nil: this build carries no agent binaries and finds
// them on disk (see agentLocator).
func embeddedAgents() fs.FS { return nil }
