package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"hoist/e2e/cloudsim/arm"
	"hoist/e2e/cloudsim/ec2"
	"hoist/e2e/cloudsim/gce"
	lambdasim "hoist/e2e/cloudsim/lambda"
	runpodsim "hoist/e2e/cloudsim/runpod"
	"hoist/e2e/cloudsim/sim"
	vastaisim "hoist/e2e/cloudsim/vastai"
	"hoist/e2e/cloudsim/verda"
	"hoist/e2e/cloudsim/vultr"
	"hoist/e2e/testenv"
)

// cloudWithin bounds each wait of the cloud scenarios: a simulated VM boots
// in well under a second, the agents' upload and the shim's start take a few.
const cloudWithin = 2 * time.Minute

// TestClouds drives each cloud driver through `hoist serve` and Git against
// the cloud simulator (e2e/cloudsim): a fleet `backends: [<cloud>]` with
// one node gets a VM that hoist takes over like an SSH host, a task on it
// ends done with its output, the instance's price shows in the instances
// API, in the plan and on the dashboard, and removing the fleet terminates
// the VM and leaves nothing with the installation's tags. Each cloud takes
// about 10 s; the faults run on AWS (TestClouds_faults).
func TestClouds(t *testing.T) {
	for _, p := range []string{"aws", "gcp", "azure"} {
		t.Run(p, func(t *testing.T) {
			e := newCloudEnv(t, p, "3s")
			e.fullPath()
		})
	}
}

// fullPath is the path for one cloud: fleet → VM ready, task → done,
// price in API, plan and dashboard, fleet removed → VM terminated.
func (e *cloudEnv) fullPath() {
	t, s, r := e.t, e.s, e.r
	t.Log("phase: a one-node fleet on the cloud gets a VM hoist takes over")
	r.write("fleet.dstack.yml", e.fleetSpec("cloud", "on-demand"))
	r.commit("a one-node fleet on " + e.provider)
	inst := e.waitFleetReady("cloud")
	vm := e.liveVM()
	if vm.InstanceType != inst.InstanceType || inst.Spot {
		t.Fatalf("simulator VM %+v, hoist instance %+v: want the same on-demand instance type", vm, inst)
	}

	t.Log("phase: a task on the fleet ends done with its output")
	r.write("hello.dstack.yml", e.taskOn("hello", "cloud", "  - echo hello from "+e.provider+"\n"))
	sha := r.commit("a task on the cloud fleet")
	s.waitRun("hello", sha, "done", cloudWithin)
	if got := s.logs("hello"); got != "hello from "+e.provider+"\n" {
		t.Fatalf("hello logs: %q", got)
	}
	if j := s.sshRun("hello").Jobs; len(j) != 1 || j[0].Instance != inst.Name {
		t.Fatalf("hello jobs %+v, want one on %s", j, inst.Name)
	}

	t.Log("phase: the instance's price shows in the API, the plan and the dashboard")
	want := e.catalogPrice(inst)
	if math.Abs(inst.Price-want) > 1e-9 || inst.Price <= 0 {
		t.Fatalf("instance %s costs %v in the API, the catalog says %v for %s in %s", inst.Name, inst.Price, want, inst.InstanceType, inst.Region)
	}
	if p := e.plan(); math.Abs(p.CostBefore-inst.Price) > 1e-6 {
		t.Fatalf("plan cost_before = %v, want the instance's %v", p.CostBefore, inst.Price)
	}
	code, page := s.do("GET", "/fleets", nil)
	if code != 200 || !bytes.Contains(page, []byte(inst.Name)) || !bytes.Contains(page, []byte(fmt.Sprintf("$%.3f", inst.Price))) {
		t.Fatalf("GET /fleets: %d; want %s at $%.3f/h on the page", code, inst.Name, inst.Price)
	}

	t.Log("phase: removing the fleet terminates the VM")
	r.remove("hello.dstack.yml")
	r.remove("fleet.dstack.yml")
	e.removeCommit("remove the fleet")
	e.waitNothingLeft()
	if got := e.vm(vm.ID); got.State != sim.StateTerminated {
		t.Fatalf("VM %s is %s after the fleet was removed, want %s", vm.ID, got.State, sim.StateTerminated)
	}
}

// TestClouds_faults runs the fault scenarios on the simulated AWS: a
// capacity error on the cheapest offer makes hoist use the next one; with
// 30 % of the API calls failing a fleet still gets its VM and a task on it
// ends done; a spot VM the provider reclaims ends its job
// interrupted_by_no_capacity, and the run's retry policy resubmits it onto
// the fleet's replacement VM.
func TestClouds_faults(t *testing.T) {
	t.Parallel() // mostly waits: runs beside the other slow tests (harness_test.go)
	e := newCloudEnv(t, "aws", "2s")
	t.Run("capacity error on the cheapest offer", e.capacity)
	t.Run("30% of API calls fail", e.errorRate)
	t.Run("spot interruption", e.spotInterruption)
}

func (e *cloudEnv) capacity(t *testing.T) {
	e.use(t, "cap")
	// The simulator's capacity is per instance type in every region: the
	// offer used is the cheapest of another type.
	offers := e.offers("on-demand", 10)
	cheapest := offers[0]
	i := slices.IndexFunc(offers, func(o apiOffer) bool { return o.Instance != cheapest.Instance })
	if i < 0 {
		t.Fatalf("no second instance type among the offers %+v", offers)
	}
	next := offers[i]
	e.sim.Faults(sim.Faults{Capacity: map[string]int{cheapest.Instance: 0}})
	defer e.sim.Faults(sim.Faults{})
	e.r.write("cap.dstack.yml", e.fleetSpec("cap", "on-demand"))
	e.r.commit("a fleet whose cheapest offer has no capacity")
	inst := e.waitFleetReady("cap")
	if inst.InstanceType == cheapest.Instance {
		t.Fatalf("instance %+v has the type that has no capacity", inst)
	}
	if inst.InstanceType != next.Instance || math.Abs(inst.Price-next.Price) > 1e-9 {
		t.Errorf("instance %s %s at %v, want the next offer %s at %v", inst.Name, inst.InstanceType, inst.Price, next.Instance, next.Price)
	}
	for _, r := range e.sim.Instances() {
		if r.Kind == sim.KindInstance && r.InstanceType == cheapest.Instance && r.State != sim.StateTerminated {
			t.Errorf("a VM of the type without capacity exists: %+v", r)
		}
	}
	e.r.remove("cap.dstack.yml")
	e.removeCommit("remove the capacity fleet")
	e.waitNothingLeft()
}

func (e *cloudEnv) errorRate(t *testing.T) {
	e.use(t, "through", "flaky")
	e.sim.Faults(sim.Faults{ErrorRate: 0.3})
	defer e.sim.Faults(sim.Faults{})
	before := e.sim.Stats()
	count := func(m func(sim.Stats) map[string]map[string]int) int {
		return sumCalls(m(e.sim.Stats()), e.provider) - sumCalls(m(before), e.provider)
	}
	calls := func(s sim.Stats) map[string]map[string]int { return s.Calls }
	failed := func(s sim.Stats) map[string]map[string]int { return s.Failed }
	// Three nodes, so that enough calls are made (launch, observe,
	// terminate; the SDKs retry throttling themselves) for some to fail.
	e.r.write("flaky.dstack.yml", strings.Replace(e.fleetSpec("flaky", "on-demand"), "nodes: 1", "nodes: 3", 1))
	e.r.write("through.dstack.yml", e.taskOn("through", "flaky", "  - echo through the errors\n"))
	sha := e.r.commit("a fleet and a task while 30% of API calls fail")
	e.s.waitRun("through", sha, "done", 2*cloudWithin)
	if got := e.s.logs("through"); got != "through the errors\n" {
		t.Fatalf("through logs: %q", got)
	}
	e.r.remove("through.dstack.yml")
	e.r.remove("flaky.dstack.yml")
	e.removeCommit("remove the flaky fleet while calls still fail")
	e.waitNothingLeft()
	t.Logf("%d of %d API calls failed on purpose while a 3-node fleet came up, ran a task and went away", count(failed), count(calls))
	if count(failed) == 0 {
		t.Errorf("none of the %d API calls failed: the fault was not exercised", count(calls))
	}
}

func (e *cloudEnv) spotInterruption(t *testing.T) {
	e.use(t, "long", "spot")
	e.offers("spot", 1) // the catalog has spot rows for this cloud and region
	e.r.write("spot.dstack.yml", e.fleetSpec("spot", "spot"))
	e.r.write("long.dstack.yml", e.taskOn("long", "spot", "  - echo start\n  - sleep 600\n")+
		"retry:\n  on_events: [interruption]\n  duration: 10m\n")
	sha := e.r.commit("a long task on a spot fleet")
	e.s.waitRun("long", sha, "running", cloudWithin)
	first := e.s.sshRun("long").Jobs[0]
	vm := e.liveVM()
	if !vm.Spot {
		t.Fatalf("the fleet's VM is not spot: %+v", vm)
	}
	e.sim.Interrupt(vm.ID)
	run := e.s.waitSSHRun("long", 2*cloudWithin, "resubmitted and running on another instance", func(r sshRun) bool {
		return r.Status == "running" && slices.ContainsFunc(r.Jobs, func(j sshJob) bool {
			return j.SubmissionNum > 0 && j.Status == "running" && j.Instance != first.Instance
		})
	})
	for _, j := range run.Jobs {
		if j.SubmissionNum == 0 && (j.Status != "failed" || j.TerminationReason != "interrupted_by_no_capacity") {
			t.Errorf("first submission %+v, want failed with interrupted_by_no_capacity", j)
		}
	}
	if got := e.vm(vm.ID); got.State != sim.StateTerminated || !got.Interrupted {
		t.Errorf("reclaimed VM %+v, want terminated and interrupted", got)
	}
	e.r.remove("long.dstack.yml")
	e.r.remove("spot.dstack.yml")
	e.removeCommit("remove the spot fleet")
	e.waitNothingLeft()
}

// TestClouds_volume: a `type: volume` on the simulated AWS is created with
// the installation's tags; a task on one VM mounts it and writes a file, a
// second task on another VM (another fleet) mounts it and reads the file;
// removing the specs (volume deletion confirmed, as the prune guard holds
// it) deletes the VMs and the volume.
func TestClouds_volume(t *testing.T) { volumeAcrossFleets(t, "aws") }

// volumeAcrossFleets writes a file to a network volume of provider from a
// task on one fleet's VM and reads it from a task on another's.
func volumeAcrossFleets(t *testing.T, provider string) {
	testenv.Require(t, "losetup")
	testenv.Require(t, "mkfs.ext4")
	e := newCloudEnv(t, provider, "2s")
	region := e.regions()[0]
	e.r.write("data.dstack.yml", "type: volume\nname: data\nbackend: "+provider+"\nregion: "+region+"\nsize: 1GB\n")
	for _, f := range []string{"va", "vb"} {
		b := "backends: [" + provider + "]\n"
		e.r.write(f+".dstack.yml", strings.Replace(e.fleetSpec(f, "on-demand"), b, b+"regions: ["+region+"]\n", 1))
	}
	e.r.write("write.dstack.yml", e.taskOn("write", "va", "  - echo written on the first VM > /data/note\n  - echo wrote\n")+"volumes: [data:/data]\n")
	sha := e.r.commit("a volume, two fleets and a task writing to the volume")
	e.s.waitRun("write", sha, "done", 2*cloudWithin)
	var vol []sim.Resource
	for _, r := range e.sim.Instances() {
		if r.Kind == sim.KindVolume && e.ours(r) && !gone(r) {
			vol = append(vol, r)
		}
	}
	if len(vol) != 1 || vol[0].SizeGB != 1 {
		t.Fatalf("volumes of the installation in the simulator: %+v, want one of 1 GB", vol)
	}
	e.r.write("read.dstack.yml", e.taskOn("read", "vb", "  - cat /data/note\n")+"volumes: [data:/data]\n")
	sha = e.r.commit("a task on the other fleet reading the volume")
	e.s.waitRun("read", sha, "done", 2*cloudWithin)
	if got := e.s.logs("read"); got != "written on the first VM\n" {
		t.Fatalf("read logs %q, want the file the first task wrote", got)
	}
	w, r := e.s.sshRun("write").Jobs, e.s.sshRun("read").Jobs
	if len(w) != 1 || len(r) != 1 || w[0].Instance == r[0].Instance {
		t.Fatalf("write ran on %+v, read on %+v: want two instances", w, r)
	}
	for _, f := range []string{"write", "read", "va", "vb", "data"} {
		e.r.remove(f + ".dstack.yml")
	}
	e.removeCommit("remove everything")
	e.waitNothingLeft()
}

// cloudEnv is a cloud simulator with one provider and a `hoist serve` whose
// only backend is that provider's simulator entry (GET /_sim/backend/<p>).
type cloudEnv struct {
	t        *testing.T
	provider string
	sim      *testenv.CloudSim
	entry    map[string]any
	s        *server
	r        *repo
	// cfg is the server config's path (a test may rewrite it and restart).
	cfg string
}

// simProviders are the simulated providers, by hoist backend type.
var simProviders = map[string]func() sim.Provider{"aws": ec2.New, "gcp": gce.New, "azure": arm.New, "lambda": lambdasim.New, "verda": verda.New, "vultr": vultr.New, "runpod": runpodsim.New, "vastai": vastaisim.New}

// backendConfig writes a server config whose one backend is entry (as
// the simulator gives it) and returns its path.
func backendConfig(t testing.TB, entry map[string]any) string {
	t.Helper()
	b, err := json.Marshal(entry)
	if err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(t.TempDir(), "hoist.yaml")
	// A JSON object is a YAML flow mapping: the entry goes in as it is.
	writeTestFile(t, cfg, "backends:\n  - "+string(b)+"\n")
	return cfg
}

// newCloudEnv starts the simulator and hoist serve (instances re-checked
// every resync).
func newCloudEnv(t *testing.T, provider, resync string, serveFlags ...string) *cloudEnv {
	t.Helper()
	testenv.Docker(t)
	cs := testenv.StartCloudSim(t, simProviders[provider]())
	entry := cs.Backend(provider)
	cfg := backendConfig(t, entry)
	// Azure's endpoint is https with the simulator's CA; azidentity and
	// the SDK trust the system pool, which SSL_CERT_FILE replaces.
	var env []string
	if cs.CAFile != "" {
		env = append(env, "SSL_CERT_FILE="+cs.CAFile)
	}
	r := newRepo(t)
	r.write("README.md", "specs\n")
	r.commit("empty")
	s := startServerEnv(t, "", env, r.dir, append([]string{"--config", cfg, "--resync-interval", resync, "--unreachable-grace", "6s"}, serveFlags...)...)
	return &cloudEnv{t: t, provider: provider, sim: cs, entry: entry, s: s, r: r, cfg: cfg}
}

// use points the env's helpers at subtest t; when t fails, the specs it
// names are removed from the repository, so that the next subtest starts
// from an empty one.
func (e *cloudEnv) use(t *testing.T, specs ...string) {
	e.t, e.s.t, e.r.t = t, t, t
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		e.sim.Faults(sim.Faults{})
		for _, f := range specs {
			if _, err := os.Stat(filepath.Join(e.r.dir, f+".dstack.yml")); err == nil {
				e.r.remove(f + ".dstack.yml")
			}
		}
		e.removeCommit("remove what the failed subtest left")
		e.waitNothingLeft()
	})
}

// fleetSpec is a one-node fleet on the env's cloud with small CPU resources.
func (e *cloudEnv) fleetSpec(name, spot string) string {
	return fmt.Sprintf("type: fleet\nname: %s\nnodes: 1\nbackends: [%s]\nspot_policy: %s\nresources:\n  cpu: 2..\n  memory: 4GB..\n",
		name, e.provider, spot)
}

// taskOn is a task pinned to fleet that takes any of its instances.
func (e *cloudEnv) taskOn(name, fleet, cmds string) string {
	return task(name, cmds) + "fleets: [" + fleet + "]\nspot_policy: auto\nresources:\n  cpu: 1..\n  memory: 1GB..\n"
}

// cloudInstance is an instance as GET /api/v1/instances returns it.
type cloudInstance struct {
	Name          string  `json:"name"`
	Fleet         string  `json:"fleet"`
	Backend       string  `json:"backend"`
	Region        string  `json:"region"`
	InstanceType  string  `json:"instance_type"`
	Price         float64 `json:"price"`
	Spot          bool    `json:"spot"`
	Status        string  `json:"status"`
	StatusMessage string  `json:"status_message"`
	Reachable     bool    `json:"reachable"`
}

// waitFleetReady waits until fleet has one idle, reachable instance on the
// env's cloud (agents uploaded, shim answering) and returns it.
func (e *cloudEnv) waitFleetReady(fleet string) cloudInstance {
	e.t.Helper()
	var is, live []cloudInstance
	waitFor(e.t, cloudWithin, func() string { return fmt.Sprintf("fleet %s ready (last: %+v)", fleet, is) }, func() bool {
		is, live = nil, nil
		e.s.getJSON("/api/v1/instances?fleet="+fleet, &is)
		for _, i := range is { // instances given up on stay listed, terminated
			if i.Status != "terminated" {
				live = append(live, i)
			}
		}
		return len(live) == 1 && live[0].Status == "idle" && live[0].Reachable && live[0].Backend == e.provider
	})
	return live[0]
}

// ours reports whether a simulator resource carries the installation's
// ownership tag (keys are sanitized per provider; the value is the label),
// as a tag or in its description.
func (e *cloudEnv) ours(r sim.Resource) bool {
	// A provider without tags keeps them in the description (Verda's
	// instances; its volumes in their names, query-encoded), the
	// pod's environment (RunPod) or the instance's label, its name
	// (Vast.ai).
	if strings.Contains(r.Extra["description"], e.s.install) || strings.Contains(r.Extra["env"], e.s.install) ||
		(e.provider == "vastai" && strings.Contains(r.Name, "i="+e.s.install)) ||
		(e.provider == "verda" && r.Kind == sim.KindVolume && strings.Contains(r.Name, "="+url.QueryEscape(e.s.install))) {
		return true
	}
	for _, v := range r.Tags {
		if v == e.s.install {
			return true
		}
	}
	// Lambda has no tags: names end with the installation's marker.
	return e.provider == "lambda" && strings.HasSuffix(r.Name, lambdaMarker(e.s.install))
}

func gone(r sim.Resource) bool {
	return r.State == sim.StateTerminated || r.State == sim.StateDeleted
}

// liveVM returns the one VM of the installation that is not gone.
func (e *cloudEnv) liveVM() sim.Resource {
	e.t.Helper()
	var live []sim.Resource
	for _, r := range e.sim.Instances() {
		if r.Kind == sim.KindInstance && e.ours(r) && !gone(r) {
			live = append(live, r)
		}
	}
	if len(live) != 1 {
		e.t.Fatalf("%d live VMs of the installation in the simulator, want 1: %+v", len(live), live)
	}
	return live[0]
}

// vm returns simulator resource id.
func (e *cloudEnv) vm(id string) sim.Resource {
	e.t.Helper()
	for _, r := range e.sim.Instances() {
		if r.ID == id {
			return r
		}
	}
	e.t.Fatalf("the simulator does not know %s", id)
	return sim.Resource{}
}

// removeCommit commits the removal of specs and, when hoist holds the
// revision (deleting volumes, or every live resource: the prune guard),
// confirms it.
func (e *cloudEnv) removeCommit(msg string) {
	e.t.Helper()
	sha := e.r.commit(msg)
	var st apiSync
	waitFor(e.t, cloudWithin, func() string { return fmt.Sprintf("revision %.8s applied or held (last: %+v)", sha, st) }, func() bool {
		st = e.s.sync()
		return st.Revision == sha || st.LatestRevision == sha && st.Held
	})
	if st.Revision == sha {
		return
	}
	if code, body := e.s.do("POST", "/api/v1/sync/confirm", strings.NewReader(`{"revision":"`+sha+`"}`)); code != 200 {
		e.t.Fatalf("POST /api/v1/sync/confirm = %d %s", code, body)
	}
}

// waitNothingLeft waits until no instance or volume with the
// installation's tags is left in the simulator and hoist lists no
// instance that is not terminated.
func (e *cloudEnv) waitNothingLeft() {
	e.t.Helper()
	var left []string
	waitFor(e.t, cloudWithin, func() string { return fmt.Sprintf("nothing left (left: %v)", left) }, func() bool {
		left = nil
		for _, r := range e.sim.Instances() {
			if e.ours(r) && !gone(r) && (r.Kind == sim.KindInstance || r.Kind == sim.KindVolume || r.Kind == sim.KindPod) {
				left = append(left, r.Kind+" "+r.ID+" "+r.State)
			}
		}
		var is []cloudInstance
		e.s.getJSON("/api/v1/instances", &is)
		for _, i := range is {
			if i.Status != "terminated" {
				left = append(left, "hoist instance "+i.Name+" "+i.Status)
			}
		}
		return len(left) == 0
	})
}

// apiOffer is an offer as GET /api/v1/offers returns it.
type apiOffer struct {
	Backend  string  `json:"backend"`
	Instance string  `json:"instance"`
	Region   string  `json:"region"`
	Price    float64 `json:"price"`
	Spot     bool    `json:"spot"`
}

// regions are the regions of the simulator's backend entry.
func (e *cloudEnv) regions() []string {
	var out []string
	if rs, ok := e.entry["regions"].([]any); ok {
		for _, r := range rs {
			out = append(out, fmt.Sprint(r))
		}
	}
	return out
}

// offers returns the n cheapest catalog offers the fleets of this test can
// get (the fleet's resources in the entry's regions), failing when there
// are fewer.
func (e *cloudEnv) offers(spot string, n int) []apiOffer {
	e.t.Helper()
	q := "/api/v1/offers?backend=" + e.provider + "&cpu=2..&memory=4GB..&gpu=0&spot_policy=" + spot
	for _, r := range e.regions() {
		q += "&region=" + r
	}
	var out []apiOffer
	if code := e.s.getJSON(q+fmt.Sprintf("&limit=%d", n), &out); code != 200 || len(out) < n {
		e.t.Fatalf("GET %s: %d, %d offers, want %d", q, code, len(out), n)
	}
	return out
}

// catalogPrice is the catalog's price of the instance's offer.
func (e *cloudEnv) catalogPrice(i cloudInstance) float64 {
	e.t.Helper()
	spot := "on-demand"
	if i.Spot {
		spot = "spot"
	}
	// A GCP instance shows the zone it landed in (us-central1-a); the
	// catalog's rows are per region.
	regions := []string{i.Region}
	if z := strings.LastIndexByte(i.Region, '-'); e.provider == "gcp" && z > 0 && len(i.Region)-z == 2 {
		regions = append(regions, i.Region[:z])
	}
	var out []apiOffer
	for _, r := range regions {
		q := fmt.Sprintf("/api/v1/offers?backend=%s&instance_type=%s&region=%s&spot_policy=%s&limit=1", e.provider, i.InstanceType, r, spot)
		if code := e.s.getJSON(q, &out); code != 200 {
			e.t.Fatalf("GET %s: %d", q, code)
		}
		if len(out) == 1 {
			return out[0].Price
		}
	}
	e.t.Fatalf("no catalog offer for %s in %v (spot policy %s)", i.InstanceType, regions, spot)
	return 0
}

// apiPlan is the part of POST /api/v1/plan's answer the tests read.
type apiPlan struct {
	Valid      bool    `json:"valid"`
	CostBefore float64 `json:"cost_before"`
	CostAfter  float64 `json:"cost_after"`
}

// plan plans the repository's files as they are (no change).
func (e *cloudEnv) plan() apiPlan {
	e.t.Helper()
	files := map[string]string{}
	entries, err := os.ReadDir(e.r.dir)
	if err != nil {
		e.t.Fatal(err)
	}
	for _, de := range entries {
		if strings.HasSuffix(de.Name(), ".dstack.yml") {
			b, err := os.ReadFile(filepath.Join(e.r.dir, de.Name()))
			if err != nil {
				e.t.Fatal(err)
			}
			files[de.Name()] = string(b)
		}
	}
	body, _ := json.Marshal(map[string]any{"files": files})
	code, b := e.s.do("POST", "/api/v1/plan", bytes.NewReader(body))
	var p apiPlan
	if code != 200 || json.Unmarshal(b, &p) != nil || !p.Valid {
		e.t.Fatalf("POST /api/v1/plan: %d %s", code, b)
	}
	return p
}

// sumCalls adds the API calls of provider in a stats map.
func sumCalls(m map[string]map[string]int, provider string) int {
	n := 0
	for _, c := range m[provider] {
		n += c
	}
	return n
}

// TestMeasure_clouds measures, per simulated cloud through `hoist serve` and
// Git: a one-node fleet's commit → VM ready (SSH up, agents running), a
// one-line task's commit → done on it, and the API calls the provisioning
// took; then, on AWS, a 50-node fleet with 30 % of the API calls failing:
// commit → all 50 ready, and the calls per instance. It runs only with
// HOIST_MEASURE=1 (task measure:clouds); HOIST_MEASURE_NODES changes the
// 50.
func TestMeasure_clouds(t *testing.T) {
	if os.Getenv("HOIST_MEASURE") == "" {
		t.Skip("set HOIST_MEASURE=1 to measure")
	}
	for _, p := range []string{"aws", "gcp", "azure", "lambda", "verda", "vultr", "runpod", "vastai"} {
		t.Run(p, func(t *testing.T) {
			e := newCloudEnv(t, p, "2s")
			e.r.write("fleet.dstack.yml", e.fleetSpec("meas", "on-demand"))
			calls0 := sumCalls(e.sim.Stats().Calls, p)
			start := time.Now()
			e.r.commit("a one-node fleet")
			e.waitFleetReady("meas")
			ready := time.Since(start)
			calls := sumCalls(e.sim.Stats().Calls, p) - calls0
			var done []time.Duration
			for i := range 5 {
				name := fmt.Sprintf("meas%d", i)
				e.r.write(name+".dstack.yml", e.taskOn(name, "meas", "  - echo hi\n"))
				start := time.Now()
				sha := e.r.commit(name)
				e.s.waitRun(name, sha, "done", cloudWithin)
				done = append(done, time.Since(start))
			}
			calls1 := sumCalls(e.sim.Stats().Calls, p)
			for i := range 5 {
				e.r.remove(fmt.Sprintf("meas%d.dstack.yml", i))
			}
			e.r.remove("fleet.dstack.yml")
			start = time.Now()
			e.removeCommit("remove the fleet")
			e.waitNothingLeft()
			gone := time.Since(start)
			// A container cloud's instance is a reservation: ready at once;
			// its pods start with each task.
			t.Logf("MEASURE %s fleet commit → instance ready (a VM: SSH up, agents running): %s", p, ready.Round(time.Millisecond))
			t.Logf("MEASURE %s one-line task commit → done: %v (median %s)", p, rounded(done), median(done).Round(time.Millisecond))
			t.Logf("MEASURE %s API calls for one provisioned instance (launch to ready): %d; during 5 tasks: %d; fleet removal → VM gone: %s, %d calls",
				p, calls, calls1-calls0-calls, gone.Round(time.Millisecond), sumCalls(e.sim.Stats().Calls, p)-calls1)
			t.Logf("MEASURE %s calls by operation: %v", p, e.sim.Stats().Calls[p])
		})
	}
	t.Run("aws 50 instances with 30 percent errors", func(t *testing.T) { // no % in the name: it ends up in the VMs' sshd_config paths
		n := 50
		if v, err := strconv.Atoi(os.Getenv("HOIST_MEASURE_NODES")); err == nil && v > 0 {
			n = v
		}
		e := newCloudEnv(t, "aws", "2s")
		e.sim.Faults(sim.Faults{ErrorRate: 0.3})
		e.r.write("many.dstack.yml", strings.Replace(e.fleetSpec("many", "on-demand"), "nodes: 1", fmt.Sprintf("nodes: %d", n), 1))
		st0 := e.sim.Stats()
		start := time.Now()
		e.r.commit(fmt.Sprintf("a %d-node fleet while 30%% of API calls fail", n))
		var is []cloudInstance
		waitFor(t, 15*time.Minute, func() string { return fmt.Sprintf("%d instances ready (have %d)", n, readyCount(is)) }, func() bool {
			is = nil
			e.s.getJSON("/api/v1/instances?fleet=many", &is)
			return readyCount(is) == n
		})
		took := time.Since(start)
		st := e.sim.Stats()
		calls := sumCalls(st.Calls, "aws") - sumCalls(st0.Calls, "aws")
		failed := sumCalls(st.Failed, "aws") - sumCalls(st0.Failed, "aws")
		e.sim.Faults(sim.Faults{})
		e.r.remove("many.dstack.yml")
		start = time.Now()
		e.removeCommit("remove the big fleet")
		e.waitNothingLeft()
		t.Logf("MEASURE aws %d instances with 30%% API errors: commit → all ready %s; %d API calls (%d failed on purpose), %.1f calls per instance; removal → all gone %s",
			n, took.Round(time.Millisecond), calls, failed, float64(calls)/float64(n), time.Since(start).Round(time.Millisecond))
		t.Logf("MEASURE aws calls by operation (with errors): %v", st.Calls["aws"])
	})
}

// readyCount counts the idle, reachable instances.
func readyCount(is []cloudInstance) int {
	n := 0
	for _, i := range is {
		if i.Status == "idle" && i.Reachable {
			n++
		}
	}
	return n
}
