package main

import "testing"

// TestAgentByName_runsTheAgentsUnderTheirNames checks that the hoist binary,
// invoked as hoist-runner (as the shim's containers do) or hoist-shim (as
// SSH hosts do) or hoist-gateway (as gateway instances do), is that agent.
func TestAgentByName_runsTheAgentsUnderTheirNames(t *testing.T) {
	for _, tc := range []struct {
		argv0 string
		ran   bool
	}{
		{"/hoist/bin/hoist-runner", true},
		{"hoist-shim", true},
		{"/opt/hoist/hoist-gateway", true},
		{"/usr/local/bin/hoist", false},
	} {
		t.Run(tc.argv0, func(t *testing.T) {
			ran, err := agentByName([]string{tc.argv0, "--version"})
			if ran != tc.ran || err != nil {
				t.Fatalf("agentByName(%s --version) = %v, %v; want %v, nil", tc.argv0, ran, err, tc.ran)
			}
		})
	}
}
