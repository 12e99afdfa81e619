package e2e

import (
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"slices"
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
	cfg := backendConfig(t, entry)
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

// TestAudit_reportsLeakedThenReapedAndLost runs `hoist serve` on the
// simulated AWS with a one-second leak audit and a one-node fleet, then
// plants at the provider an instance and an EBS volume with this
// installation's tags that hoist never created, nine minutes old (the
// grace is ten), and halts the fleet's VM behind hoist's back. `hoist
// audit` (the CLI) lists the two plants as leaked with their reap time and
// exits 1, and lists the fleet's instance as lost (unless the instance
// health check saw it gone first and terminated it, as the report says it
// does); once the periodic pass has deleted the plants at their reap time,
// `hoist audit` exits 0 and /metrics shows the pass's counts at zero.
func TestAudit_reportsLeakedThenReapedAndLost(t *testing.T) {
	t.Parallel() // mostly waits: runs beside the other slow tests (harness_test.go)
	e := newCloudEnv(t, "aws", "3s", "--leak-audit-interval", "1s")
	s, cs := e.s, e.sim
	e.r.write("fleet.dstack.yml", e.fleetSpec("cloud", "on-demand"))
	e.r.commit("a one-node fleet on aws")
	inst := e.waitFleetReady("cloud")
	vm := e.liveVM()

	created := time.Now().Add(-10*time.Minute + time.Minute)
	tags := func(key, id string) map[string]string {
		return map[string]string{backends.TagInstallation: s.install, backends.TagProject: "main", key: id}
	}
	plantedVM, err := cs.Sim().Create(sim.Resource{Provider: "aws", Kind: sim.KindInstance, ID: "i-0planted", Name: "hoist-planted",
		State: sim.StateRunning, Region: vm.Region, Zone: vm.Zone, InstanceType: vm.InstanceType, Image: vm.Image, Price: vm.Price,
		Tags: tags(backends.TagInstance, "planted-vm"), CreatedAt: created})
	if err != nil {
		t.Fatal(err)
	}
	plantedVol, err := cs.Sim().Create(sim.Resource{Provider: "aws", Kind: sim.KindVolume, ID: "vol-0planted", Name: "hoist-planted",
		State: sim.StateAvailable, Region: vm.Region, Zone: vm.Zone, SizeGB: 1, Extra: map[string]string{"volume_type": "gp3"},
		Tags: tags(backends.TagVolume, "planted-vol"), CreatedAt: created})
	if err != nil {
		t.Fatal(err)
	}
	// Deleted behind hoist's back: its sshd (and the shim) stop with it.
	if err := cs.Sim().Halt("aws", vm.ID); err != nil {
		t.Fatal(err)
	}

	out, err := s.hoistCLI(e.r.dir, "audit", "-o", "json")
	var rep struct {
		GraceSeconds int `json:"grace_seconds"`
		Leaked       []struct {
			Kind       string `json:"kind"`
			ID         string `json:"id"`
			ProviderID string `json:"provider_id"`
			ReapAt     string `json:"reap_at"`
		} `json:"leaked"`
		Lost       []lostEntry       `json:"lost"`
		Duplicated []json.RawMessage `json:"duplicated"`
		Errors     []json.RawMessage `json:"errors"`
	}
	if jerr := json.Unmarshal([]byte(out), &rep); jerr != nil {
		t.Fatalf("hoist audit -o json: %v: %s", jerr, out)
	}
	if code := exitCode(err); code != 1 {
		t.Errorf("hoist audit with leaks exited %d, want 1: %s", code, out)
	}
	leaked := map[string]string{}
	for _, l := range rep.Leaked {
		leaked[l.Kind+" "+l.ID] = l.ReapAt
	}
	wantReap := created.Add(10 * time.Minute).UTC().Format(time.RFC3339)
	for _, k := range []string{"instance planted-vm", "volume planted-vol"} {
		if got, ok := leaked[k]; !ok || got != wantReap {
			t.Errorf("hoist audit leaked %v: want %s reaped at %s", leaked, k, wantReap)
		}
	}
	if rep.GraceSeconds != 600 || len(rep.Duplicated) != 0 || len(rep.Errors) != 0 {
		t.Errorf("hoist audit: grace %d, duplicated %s, errors %s; want 600 and none", rep.GraceSeconds, rep.Duplicated, rep.Errors)
	}
	table, _ := s.hoistCLI(e.r.dir, "audit")
	for _, want := range []string{"leaked: 2", "planted-vm", "planted-vol", "duplicated: 0", "errors: 0"} {
		if !strings.Contains(table, want) {
			t.Errorf("hoist audit table lacks %q:\n%s", want, table)
		}
	}
	// The halted VM's shim may answer a moment longer through the
	// connection hoist holds; the instance health check (every 30 s) may
	// also see it gone first and do what the report says (terminate it).
	var lostBy string
	waitFor(t, time.Minute, func() string { return fmt.Sprintf("instance %s lost in hoist audit (last: %+v)", inst.Name, rep.Lost) }, func() bool {
		out, _ := s.hoistCLI(e.r.dir, "audit", "-o", "json")
		rep.Lost = nil
		if json.Unmarshal([]byte(out), &rep) == nil && slices.ContainsFunc(rep.Lost, func(l lostEntry) bool {
			return l.Kind == "instance" && l.Name == inst.Name && l.Owner == "cloud" && l.Status == "idle"
		}) {
			lostBy = "hoist audit"
			return true
		}
		var is []cloudInstance
		s.getJSON("/api/v1/instances?fleet=cloud", &is)
		if slices.ContainsFunc(is, func(i cloudInstance) bool { return i.Name == inst.Name && i.Status == "terminated" }) {
			lostBy = "the instance health check, first"
			return true
		}
		return false
	})
	t.Logf("the VM deleted behind hoist's back was seen lost by %s", lostBy)

	state := func(id string) string { r, _ := cs.Sim().Get("aws", id); return r.State }
	reapAt := created.Add(10 * time.Minute)
	var last string
	waitFor(t, 2*time.Minute, func() string {
		return fmt.Sprintf("planted VM and volume deleted (%s, %s) and hoist audit clean (last: %s)", state(plantedVM.ID), state(plantedVol.ID), last)
	}, func() bool {
		if time.Now().Before(reapAt.Add(-time.Second)) && (state(plantedVol.ID) == sim.StateDeleted || state(plantedVM.ID) != sim.StateRunning) {
			t.Fatalf("a plant was deleted before its reap time %s (VM %s, volume %s)", wantReap, state(plantedVM.ID), state(plantedVol.ID))
		}
		out, err := s.hoistCLI(e.r.dir, "audit")
		last = out
		return err == nil && state(plantedVol.ID) == sim.StateDeleted && state(plantedVM.ID) != sim.StateRunning
	})
	t.Logf("hoist audit once the plants were reaped and the lost instance terminated:\n%s", last)
}

// lostEntry is an entry of the audit's lost (GET /api/v1/audit).
type lostEntry struct {
	Kind   string `json:"kind"`
	Name   string `json:"name"`
	Owner  string `json:"owner"`
	Status string `json:"status"`
}

// exitCode is err's process exit code (0 for nil, -1 when it did not
// exit).
func exitCode(err error) int {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	if err != nil {
		return -1
	}
	return 0
}
