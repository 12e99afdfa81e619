package e2e

import (
	"testing"
	"time"
)

// TestClouds_verda is TestClouds' path on the simulated Verda API: a fleet
// gets a VM found through its description (Verda has no tags), a task on it
// ends done with its output, and removing the fleet deletes the VM with its
// SSH key and startup script.
func TestClouds_verda(t *testing.T) {
	e := newCloudEnv(t, "verda", "3s")
	start := time.Now()
	e.fullPath()
	t.Logf("verda: fleet commit → task done → fleet removed and nothing left in %v", time.Since(start).Round(time.Millisecond))
	for _, r := range e.sim.Instances() {
		if (r.Kind == "ssh_key" || r.Kind == "script") && r.Extra["deleted"] != "true" {
			t.Errorf("%s %s (%s) left after the fleet was removed", r.Kind, r.ID, r.Name)
		}
	}
}

// TestClouds_volumeVerda is TestClouds_volume on Verda's block volumes: the
// volume, which carries the installation's tags in its name, shows up in the
// VM at /dev/<target>.
func TestClouds_volumeVerda(t *testing.T) { volumeAcrossFleets(t, "verda") }
