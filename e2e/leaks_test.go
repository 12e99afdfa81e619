package e2e

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"hoist/backends"
	"hoist/e2e/cloudsim/ec2"
	"hoist/e2e/cloudsim/sim"
	"hoist/e2e/testenv"
)

// TestLeakAudit_deletesUntrackedVolumesAndPlacementGroups runs `hoist
// serve` on the simulated AWS with a one-second leak audit and plants, at
// the provider, EBS volumes and cluster placement groups as lost creates
// leave them: the ones an hour old that carry this installation's tags are
// deleted (and counted in /metrics by kind), a young one and another
// installation's are left.
func TestLeakAudit_deletesUntrackedVolumesAndPlacementGroups(t *testing.T) {
	cs := testenv.StartCloudSim(t, ec2.New())
	entry := cs.Backend("aws")
	b, err := json.Marshal(entry)
	if err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(t.TempDir(), "hoist.yaml")
	writeTestFile(t, cfg, "backends:\n  - "+string(b)+"\n")
	r := newRepo(t)
	r.write("README.md", "specs\n")
	r.commit("empty")
	s := startServer(t, r.dir, "--config", cfg, "--leak-audit-interval", "1s")

	region := "us-east-1"
	if rs, ok := entry["regions"].([]any); ok && len(rs) > 0 {
		region = fmt.Sprint(rs[0])
	}
	old, now := time.Now().Add(-time.Hour), time.Now()
	plant := func(kind, id, installation, tagKey string, created time.Time) string {
		t.Helper()
		res := sim.Resource{
			Provider: "aws", Kind: kind, ID: id, Name: "hoist-" + id, State: sim.StateAvailable, Region: region,
			Tags:      map[string]string{backends.TagInstallation: installation, backends.TagProject: "main", tagKey: "hoist-id-" + id},
			CreatedAt: created,
		}
		if kind == sim.KindVolume {
			res.Zone, res.SizeGB, res.Extra = region+"a", 1, map[string]string{"volume_type": "gp3"}
		} else {
			res.Extra = map[string]string{"strategy": "cluster"}
		}
		got, err := cs.Sim().Create(res)
		if err != nil {
			t.Fatal(err)
		}
		return got.ID
	}
	leaked := []string{
		plant(sim.KindVolume, "vol-0leaked", s.install, backends.TagVolume, old),
		plant("placement_group", "pg-0leaked", s.install, backends.TagPlacementGroup, old),
	}
	kept := []string{
		plant(sim.KindVolume, "vol-0young", s.install, backends.TagVolume, now),
		plant(sim.KindVolume, "vol-0other", "another-installation", backends.TagVolume, old),
		plant("placement_group", "pg-0other", "another-installation", backends.TagPlacementGroup, old),
	}

	state := func(id string) string {
		r, _ := cs.Sim().Get("aws", id)
		return r.State
	}
	waitFor(t, time.Minute, func() string {
		return fmt.Sprintf("leaked volume and placement group deleted (states %s, %s)", state(leaked[0]), state(leaked[1]))
	}, func() bool { return state(leaked[0]) == sim.StateDeleted && state(leaked[1]) == sim.StateDeleted })
	for _, id := range kept {
		if st := state(id); st == sim.StateDeleted {
			t.Errorf("%s was deleted; a young resource and another installation's are kept", id)
		}
	}
	// The counter moves just after the provider's delete has answered.
	var missing []string
	waitFor(t, 10*time.Second, func() string {
		return fmt.Sprintf("GET /metrics with the lines %q", missing)
	}, func() bool {
		code, body := s.do("GET", "/metrics", nil)
		missing = nil
		for _, kind := range []string{"volume", "placement_group"} {
			want := fmt.Sprintf(`hoist_leaked_resources_deleted_total{backend="aws",kind="%s"} 1`, kind)
			if code != 200 || !strings.Contains(string(body), want) {
				missing = append(missing, want)
			}
		}
		return len(missing) == 0
	})
}
