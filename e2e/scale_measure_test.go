package e2e

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"hoist/e2e/cloudsim/ec2"
	"hoist/e2e/testenv"
)

// The scale scenario's shape: each simulated VM has scaleCPUs vCPUs split
// into as many one-CPU blocks, so that scaleCPUs jobs share it, and the
// VMs are grouped in fleets of at most scaleFleetNodes nodes.
const (
	scaleCPUs       = 16
	scaleFleetNodes = 8
)

// scaleJobMiB is the host memory one active job takes (its container's
// resident memory and its containerd shim), measured here at 100 and 200
// runs (15.4 and 14.4 MiB); scaleMarginMiB is kept free for the rest of
// the machine.
const (
	scaleJobMiB    = 16.0
	scaleMarginMiB = 4096.0
)

// scaleRunsPageGoal is the goal stated for /runs (web/bench_test.go,
// TestMeasure_runsPageUnderWrk: p99 ≤ 50 ms with 1,000 runs); the API has
// no goal of its own in the repository and is held to the same one.
const scaleRunsPageGoal = 50 * time.Millisecond

// scaleFigures are the figures of one scale scenario.
type scaleFigures struct {
	// Runs is the number of active runs reached, of Asked.
	Runs, Asked, Specs, VMs, Fleets int
	// CommitToRunning is the tasks' commit → every run running.
	CommitToRunning time.Duration
	// FleetsReady is the fleets' commit → every VM idle and reachable.
	FleetsReady time.Duration
	// RefMiB is the RSS of an idle hoist serve on an empty repository,
	// measured in the same run.
	RefMiB                   float64
	RSSPeakMiB, RSSSteadyMiB float64
	// CPU seconds of the server (utime+stime) over the fleets' and the
	// tasks' ramps, and per second of the steady window.
	CPUFleetRamp, CPURunRamp, CPUSteadyPerSec float64
	SteadyWindow                              time.Duration
	DBBytes                                   int64
	QueueMax, QueueSteadyMax                  float64
	QueueSteadyMean                           float64
	ScheduledSteadyMean                       float64
	// ReconcileP99 is p99 of hoist_reconcile_duration_seconds per kind
	// over the whole scenario, ReconcileP99Steady over the steady window.
	ReconcileP99, ReconcileP99Steady map[string]float64
	Goroutines                       float64
	// HostMiBPerVM is the RSS of a simulated VM's processes (sshd, shim);
	// HostMiBPerJob the resident memory of a job's container (runner,
	// sleep) and its containerd shim.
	HostMiBPerVM, HostMiBPerJob float64
	Latency                     []scaleLatency
}

// scaleLatency is one path's latency at steady state.
type scaleLatency struct {
	Path     string
	Clients  int
	Requests int
	P50, P99 time.Duration
	Errors   int
}

// TestMeasure_scale measures hoist serve with many active runs on the
// simulated AWS: a repository of HOIST_MEASURE_SPECS specs (default
// 10,000) of which HOIST_MEASURE_RUNS (default 1,000) are tasks running
// `sleep` on fleets of 16-vCPU VMs split into 16 one-CPU blocks (8 VMs a
// fleet at most), each job a real container of the host's Docker driven
// by the VM's shim; the other specs are elastic fleets of no nodes
// (`nodes: 0..1`, nothing is provisioned for them). It prints the
// server's RSS (peak, steady, next to an idle server on an empty
// repository), its CPU seconds over the ramps and at steady state, the
// size of its SQLite files, the reconcile queue's depth, p99 reconcile
// latency per kind, commit → all runs running, and /runs and
// /api/v1/runs latency (sequential and 4 concurrent clients) beside their
// goal, with the run-list cache cleared on every reconcile as in
// production. HOIST_MEASURE_STEADY sets the steady window (default 60s).
// Set HOIST_MEASURE=1 to run it.
func TestMeasure_scale(t *testing.T) {
	if os.Getenv("HOIST_MEASURE") == "" {
		t.Skip("measurement: set HOIST_MEASURE=1")
	}
	runs, specs := 1000, 10000
	if v, err := strconv.Atoi(os.Getenv("HOIST_MEASURE_RUNS")); err == nil && v > 0 {
		runs = v
	}
	if v, err := strconv.Atoi(os.Getenv("HOIST_MEASURE_SPECS")); err == nil && v > 0 {
		specs = v
	}
	steady := 60 * time.Second
	if v, err := time.ParseDuration(os.Getenv("HOIST_MEASURE_STEADY")); err == nil && v > 0 {
		steady = v
	}
	f := measureScale(t, runs, specs, steady)
	f.print(os.Stdout)
	if out := os.Getenv("HOIST_MEASURE_SCALE_OUT"); out != "" {
		b, err := json.Marshal(f)
		if err != nil {
			t.Fatal(err)
		}
		writeTestFile(t, out, string(b))
	}
}

// BenchmarkTable_rss1000Runs runs TestMeasure_scale's scenario once (1,000
// active runs, 10,000 specs; HOIST_MEASURE_RUNS and HOIST_MEASURE_SPECS
// change them) in a child test process and reports the server's steady
// RSS as hoist-MiB; ref-MiB, the reference, is the RSS of an idle hoist
// serve on an empty repository measured in the same run.
func BenchmarkTable_rss1000Runs(b *testing.B) {
	out := filepath.Join(b.TempDir(), "scale.json")
	for b.Loop() {
		cmd := exec.Command(os.Args[0], "-test.run", "^TestMeasure_scale$", "-test.count", "1", "-test.timeout", "3h", "-test.v")
		cmd.Env = append(os.Environ(), "HOIST_MEASURE=1", "HOIST_MEASURE_SCALE_OUT="+out)
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if err := cmd.Run(); err != nil {
			b.Fatalf("TestMeasure_scale: %v", err)
		}
	}
	raw, err := os.ReadFile(out)
	if err != nil {
		b.Fatal(err)
	}
	var f scaleFigures
	if err := json.Unmarshal(raw, &f); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(f.RSSSteadyMiB, "hoist-MiB")
	b.ReportMetric(f.RefMiB, "ref-MiB")
	b.ReportMetric(float64(f.Runs), "runs")
}

// measureScale runs the scenario and returns its figures; the server's
// containers and the simulator's VMs go when the test ends, whatever its
// outcome (startServer and StartCloudSim clean up).
func measureScale(t *testing.T, runs, specs int, steady time.Duration) scaleFigures {
	f := scaleFigures{Runs: runs, Asked: runs, Specs: specs}
	f.VMs = (runs + scaleCPUs - 1) / scaleCPUs
	f.Fleets = (f.VMs + scaleFleetNodes - 1) / scaleFleetNodes
	nodes := (f.VMs + f.Fleets - 1) / f.Fleets
	if specs < runs+f.Fleets {
		t.Fatalf("%d specs cannot hold %d runs and %d fleets", specs, runs, f.Fleets)
	}

	// The reference: an idle server on an empty repository.
	{
		r := newRepo(t)
		r.write("README.md", "no specs\n")
		r.commit("empty")
		s := startServer(t, r.dir, "--no-local-fleet")
		waitFor(t, time.Minute, func() string { return "empty repository synced" }, func() bool { return s.sync().Status == "synced" })
		time.Sleep(5 * time.Second) // past start-up
		f.RefMiB = rssMiB(t, s.cmd.Process.Pid)
		s.stop()
	}

	testenv.Docker(t)
	cs := testenv.StartCloudSim(t, ec2.New())
	entry, err := json.Marshal(cs.Backend("aws"))
	if err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(t.TempDir(), "hoist.yaml")
	writeTestFile(t, cfg, "backends:\n  - "+string(entry)+"\n")
	r := newRepo(t)
	for i := range specs - runs - f.Fleets {
		r.write(fmt.Sprintf("idle/d%02d/e%05d.dstack.yml", i%50, i),
			fmt.Sprintf("type: fleet\nname: e%05d\nnodes: 0..1\nbackends: [aws]\nresources:\n  cpu: 2..\n  memory: 4GB..\n", i))
	}
	for i := range f.Fleets {
		r.write(fmt.Sprintf("pools/pool%02d.dstack.yml", i), fmt.Sprintf(
			"type: fleet\nname: pool%02d\nnodes: %d\nbackends: [aws]\nspot_policy: on-demand\nblocks: %d\nresources:\n  cpu: %d\n  memory: %dGB..\n",
			i, nodes, scaleCPUs, scaleCPUs, scaleCPUs))
	}
	sha := r.commit(fmt.Sprintf("%d idle fleets and %d fleets of %d nodes", specs-runs-f.Fleets, f.Fleets, nodes))
	began := time.Now()
	s := startServer(t, r.dir, "--config", cfg, "--no-local-fleet", "--validate-timeout", "10m", "--log-level", "info")
	pid := s.cmd.Process.Pid
	smp := startScaleSampler(s.url, s.token, pid)
	defer smp.stop()
	fmt.Printf("scale: %d specs, %d fleets × %d nodes of %d vCPUs in %d blocks (%d VMs) for %d runs\n",
		specs, f.Fleets, nodes, scaleCPUs, scaleCPUs, f.VMs, runs)
	waitFor(t, 20*time.Minute, func() string { return fmt.Sprintf("revision %.8s synced (%+v)", sha, s.sync()) }, func() bool {
		st := s.sync()
		return st.Revision == sha && st.Status == "synced"
	})
	fmt.Printf("  first sync of %d specs: %s\n", specs-runs, time.Since(began).Round(time.Millisecond))
	var ready int
	waitFor(t, 30*time.Minute, func() string { return fmt.Sprintf("%d VMs ready (%d are)", f.VMs, ready) }, func() bool {
		var is []cloudInstance
		s.getJSON("/api/v1/instances", &is)
		ready = 0
		for _, i := range is {
			if i.Status == "idle" && i.Reachable {
				ready++
			}
		}
		return ready >= f.VMs
	})
	f.FleetsReady = time.Since(began)
	f.CPUFleetRamp = cpuSeconds(t, pid)
	f.HostMiBPerVM = processesMiB(t, cs.StateDir) / float64(f.VMs)
	fmt.Printf("  fleets' commit → %d VMs ready: %s (host: %.1f MiB per VM)\n", f.VMs, f.FleetsReady.Round(time.Millisecond), f.HostMiBPerVM)

	// Each job is a container and a runner on this host: as many as fit
	// beside a margin for the rest of the machine, and no more.
	if fit := int((memAvailableMiB(t) - scaleMarginMiB) / scaleJobMiB); fit < runs {
		fmt.Printf("  only %d of %d runs fit in this host's memory (%.0f MiB a job measured at 100 and 200 runs, %.0f MiB kept free): measuring %d\n",
			max(fit, 0), runs, scaleJobMiB, scaleMarginMiB, max(fit, 0))
		runs = fit
		f.Runs = fit
		if runs < 1 {
			t.Fatalf("no run fits in this host's memory")
		}
	}
	for i := range runs {
		name := fmt.Sprintf("a%04d", i)
		r.write(fmt.Sprintf("active/d%02d/%s.dstack.yml", i%20, name),
			task(name, "  - sleep 1000000\n")+fmt.Sprintf("fleets: [pool%02d]\nresources:\n  cpu: 1\n  memory: 1GB..\n", i%f.Fleets))
	}
	sha = r.commit(fmt.Sprintf("%d long tasks", runs))
	began = time.Now()
	cpu0 := cpuSeconds(t, pid)
	var running int
	waitFor(t, 60*time.Minute, func() string { return fmt.Sprintf("%d runs running (%d are)", runs, running) }, func() bool {
		last := smp.last()
		if last.runsEnded > 0 {
			var events []struct{ Name, Message string }
			s.getJSON("/api/v1/events?kind=job&limit=3", &events)
			t.Fatalf("%.0f runs ended while %d should run (last job events: %+v)", last.runsEnded, runs, events)
		}
		running = int(last.runsRunning)
		return running >= runs
	})
	f.CommitToRunning = time.Since(began)
	f.CPURunRamp = cpuSeconds(t, pid) - cpu0
	f.HostMiBPerJob = containersMiB(t, s.install) / float64(runs)
	fmt.Printf("  tasks' commit → %d runs running: %s (host: %.1f MiB per job)\n", runs, f.CommitToRunning.Round(time.Millisecond), f.HostMiBPerJob)

	// Steady state: every run running, the server resyncing them.
	h0 := scrapeMetrics(s.url, s.token)
	cpu0, at0 := cpuSeconds(t, pid), time.Now()
	steadyFrom := len(smp.all())
	if dir := os.Getenv("HOIST_MEASURE_PROFILES"); dir != "" {
		saveProfiles(t, s, dir, steady)
	}
	time.Sleep(steady)
	f.latency(t, s)
	f.SteadyWindow = time.Since(at0)
	f.CPUSteadyPerSec = (cpuSeconds(t, pid) - cpu0) / f.SteadyWindow.Seconds()
	h1 := scrapeMetrics(s.url, s.token)
	smp.stop()
	all := smp.all()
	var steadyRSS []float64
	var qSum, sSum float64
	for i, x := range all {
		f.RSSPeakMiB = max(f.RSSPeakMiB, x.rssMiB)
		f.QueueMax = max(f.QueueMax, x.queue)
		if i >= steadyFrom {
			steadyRSS = append(steadyRSS, x.rssMiB)
			f.QueueSteadyMax = max(f.QueueSteadyMax, x.queue)
			qSum += x.queue
			sSum += x.scheduled
		}
	}
	if n := len(all) - steadyFrom; n > 0 {
		f.QueueSteadyMean = qSum / float64(n)
		f.ScheduledSteadyMean = sSum / float64(n)
		slices.Sort(steadyRSS)
		f.RSSSteadyMiB = steadyRSS[len(steadyRSS)/2]
	}
	f.ReconcileP99 = reconcileP99(h1, nil)
	f.ReconcileP99Steady = reconcileP99(h1, h0)
	if g := h1["go_goroutines"]; g != nil && len(g.Metric) == 1 {
		f.Goroutines = g.Metric[0].GetGauge().GetValue()
	}
	f.DBBytes = dbBytes(t, s.dataDir)
	if running := int(smp.last().runsRunning); running < runs {
		t.Errorf("%d of %d runs are running at the end of the steady window", running, runs)
	}
	return f
}

// latency measures /runs and /api/v1/runs: 200 sequential requests each,
// then 4 concurrent clients of 50 requests each.
func (f *scaleFigures) latency(t *testing.T, s *server) {
	for _, path := range []string{"/runs", "/api/v1/runs"} {
		for _, c := range []struct{ clients, each int }{{1, 200}, {4, 50}} {
			l := scaleLatency{Path: path, Clients: c.clients, Requests: c.clients * c.each}
			var mu sync.Mutex
			var took []time.Duration
			var wg sync.WaitGroup
			for range c.clients {
				wg.Go(func() {
					for range c.each {
						d, err := timedGet(s.url+path, s.token)
						mu.Lock()
						if err != nil {
							l.Errors++
						} else {
							took = append(took, d)
						}
						mu.Unlock()
					}
				})
			}
			wg.Wait()
			if len(took) == 0 {
				t.Fatalf("no GET %s answered", path)
			}
			slices.Sort(took)
			l.P50 = took[len(took)/2]
			l.P99 = took[min(len(took)-1, int(math.Ceil(0.99*float64(len(took))))-1)]
			f.Latency = append(f.Latency, l)
		}
	}
}

func timedGet(url, token string) (time.Duration, error) {
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	start := time.Now()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	_, err = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return time.Since(start), err
}

func (f scaleFigures) print(w io.Writer) {
	fmt.Fprintf(w, "scale on the simulated AWS: %d active runs (of %d asked), %d specs, %d VMs in %d fleets\n", f.Runs, f.Asked, f.Specs, f.VMs, f.Fleets)
	fmt.Fprintf(w, "  fleets' commit → VMs ready   %s\n", f.FleetsReady.Round(time.Millisecond))
	fmt.Fprintf(w, "  tasks' commit → all running  %s\n", f.CommitToRunning.Round(time.Millisecond))
	fmt.Fprintf(w, "  server RSS                   peak %.0f MiB, steady %.0f MiB (idle server, empty repository: %.0f MiB)\n", f.RSSPeakMiB, f.RSSSteadyMiB, f.RefMiB)
	fmt.Fprintf(w, "  server CPU                   %.1f s over the fleets' ramp, %.1f s over the runs' ramp, %.3f s/s steady (%s window)\n",
		f.CPUFleetRamp, f.CPURunRamp, f.CPUSteadyPerSec, f.SteadyWindow.Round(time.Second))
	fmt.Fprintf(w, "  goroutines at steady state   %.0f\n", f.Goroutines)
	fmt.Fprintf(w, "  DB size (SQLite + WAL)       %.1f MiB\n", float64(f.DBBytes)/(1<<20))
	fmt.Fprintf(w, "  reconcile queue backlog      max %.0f; steady max %.0f, mean %.1f (all kinds; scheduled re-checks besides: steady mean %.1f)\n",
		f.QueueMax, f.QueueSteadyMax, f.QueueSteadyMean, f.ScheduledSteadyMean)
	kinds := make([]string, 0, len(f.ReconcileP99))
	for k := range f.ReconcileP99 {
		kinds = append(kinds, k)
	}
	slices.Sort(kinds)
	for _, k := range kinds {
		fmt.Fprintf(w, "  p99 reconcile %-14s %s overall, %s steady\n", k, fmtSecs(f.ReconcileP99[k]), fmtSecs(f.ReconcileP99Steady[k]))
	}
	fmt.Fprintf(w, "  host memory                  %.1f MiB per VM (sshd + shim), %.1f MiB per active job (container + runner)\n", f.HostMiBPerVM, f.HostMiBPerJob)
	for _, l := range f.Latency {
		verdict := "within"
		if l.P99 > scaleRunsPageGoal {
			verdict = "OVER"
		}
		fmt.Fprintf(w, "  GET %-13s %d client(s) × %3d: p50 %6.1f ms, p99 %6.1f ms (goal p99 ≤ %s: %s)%s\n", l.Path, l.Clients, l.Requests/l.Clients,
			ms(l.P50), ms(l.P99), scaleRunsPageGoal, verdict, errNote(l.Errors))
	}
}

func errNote(n int) string {
	if n == 0 {
		return ""
	}
	return fmt.Sprintf(", %d errors", n)
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func fmtSecs(s float64) string {
	if math.IsNaN(s) {
		return "-"
	}
	return fmt.Sprintf("%.3fs", s)
}

// scaleSample is one sample of the server: its RSS, the reconcile queue's
// depth, the runs running and those ended.
type scaleSample struct {
	at                                               time.Time
	rssMiB, queue, scheduled, runsRunning, runsEnded float64
}

// scaleSampler samples the server every second until stopped.
type scaleSampler struct {
	mu      sync.Mutex
	samples []scaleSample
	quit    chan struct{}
	done    chan struct{}
	once    sync.Once
}

func startScaleSampler(url, token string, pid int) *scaleSampler {
	s := &scaleSampler{quit: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			x := scaleSample{at: time.Now(), rssMiB: procRSSMiB(pid)}
			if m := scrapeMetrics(url, token); m != nil {
				// Every kind's backlog, and apart the keys waiting for
				// their scheduled re-check.
				if g := m["hoist_queue_depth"]; g != nil {
					for _, mm := range g.Metric {
						x.queue += mm.GetGauge().GetValue()
					}
				}
				if g := m["hoist_queue_scheduled"]; g != nil {
					for _, mm := range g.Metric {
						x.scheduled += mm.GetGauge().GetValue()
					}
				}
				if g := m["hoist_runs"]; g != nil {
					for _, mm := range g.Metric {
						switch label(mm, "status") {
						case "running":
							x.runsRunning += mm.GetGauge().GetValue()
						case "done", "failed", "terminated":
							x.runsEnded += mm.GetGauge().GetValue()
						}
					}
				}
			}
			s.mu.Lock()
			s.samples = append(s.samples, x)
			s.mu.Unlock()
			select {
			case <-s.quit:
				return
			case <-tick.C:
			}
		}
	}()
	return s
}

func (s *scaleSampler) stop() {
	s.once.Do(func() { close(s.quit) })
	<-s.done
}

func (s *scaleSampler) all() []scaleSample {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.samples)
}

func (s *scaleSampler) last() scaleSample {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.samples) == 0 {
		return scaleSample{}
	}
	return s.samples[len(s.samples)-1]
}

func label(m *dto.Metric, name string) string {
	for _, l := range m.Label {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// scrapeMetrics returns the server's /metrics, nil when it does not answer.
func scrapeMetrics(url, token string) map[string]*dto.MetricFamily {
	req, err := http.NewRequest(http.MethodGet, url+"/metrics", nil)
	if err != nil {
		return nil
	}
	req.Header.Set("Authorization", "Bearer "+token)
	c := &http.Client{Timeout: 30 * time.Second}
	resp, err := c.Do(req)
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	p := expfmt.NewTextParser(model.UTF8Validation)
	m, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		return nil
	}
	return m
}

// reconcileP99 is p99 of hoist_reconcile_duration_seconds per kind (all
// results together) in after, less the counts in before when given,
// interpolated within its bucket as Prometheus's histogram_quantile does.
func reconcileP99(after, before map[string]*dto.MetricFamily) map[string]float64 {
	type hist struct {
		bounds []float64
		counts []float64
		total  float64
	}
	collect := func(m map[string]*dto.MetricFamily, sign float64, into map[string]*hist) {
		fam := m["hoist_reconcile_duration_seconds"]
		if fam == nil {
			return
		}
		for _, mm := range fam.Metric {
			k := label(mm, "kind")
			h := into[k]
			hh := mm.GetHistogram()
			if h == nil {
				h = &hist{}
				for _, b := range hh.Bucket {
					h.bounds = append(h.bounds, b.GetUpperBound())
				}
				h.counts = make([]float64, len(h.bounds))
				into[k] = h
			}
			for i, b := range hh.Bucket {
				if i < len(h.counts) {
					h.counts[i] += sign * float64(b.GetCumulativeCount())
				}
			}
			h.total += sign * float64(hh.GetSampleCount())
		}
	}
	hs := map[string]*hist{}
	collect(after, 1, hs)
	if before != nil {
		collect(before, -1, hs)
	}
	out := map[string]float64{}
	for k, h := range hs {
		out[k] = math.NaN()
		if h.total <= 0 {
			continue
		}
		rank := 0.99 * h.total
		lower, prev := 0.0, 0.0
		for i, c := range h.counts {
			if c >= rank {
				out[k] = lower + (h.bounds[i]-lower)*(rank-prev)/math.Max(c-prev, 1e-9)
				break
			}
			lower, prev = h.bounds[i], c
		}
		if math.IsNaN(out[k]) { // in the +Inf bucket: the highest bound
			out[k] = h.bounds[len(h.bounds)-1]
		}
	}
	return out
}

// procRSSMiB is VmRSS of process pid in MiB, 0 when unreadable.
func procRSSMiB(pid int) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	return kBField(b, "VmRSS:") / 1024
}

func rssMiB(t *testing.T, pid int) float64 {
	t.Helper()
	v := procRSSMiB(pid)
	if v == 0 {
		t.Fatalf("no VmRSS for pid %d", pid)
	}
	return v
}

// memAvailableMiB is the host's MemAvailable in MiB.
func memAvailableMiB(t *testing.T) float64 {
	t.Helper()
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		t.Fatal(err)
	}
	return kBField(b, "MemAvailable:") / 1024
}

// processesMiB sums the RSS of the processes whose command line names
// dir (the simulator's VMs: their sshd and what runs under it).
func processesMiB(t *testing.T, dir string) float64 {
	t.Helper()
	ents, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmd, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if err == nil && bytes.Contains(cmd, []byte(dir)) {
			sum += procRSSMiB(pid)
		}
	}
	return sum
}

// containersMiB sums the resident memory of the installation's containers
// (their memory cgroup's rss, v1 or v2) and of their containerd shims.
func containersMiB(t *testing.T, install string) float64 {
	t.Helper()
	out, err := exec.Command("docker", "ps", "-q", "--no-trunc", "--filter", "label=hoist.installation="+install).Output()
	if err != nil {
		t.Fatalf("docker ps: %v", err)
	}
	ids := strings.Fields(string(out))
	ours := map[string]bool{}
	for _, id := range ids {
		ours[id] = true
	}
	var sum float64
	ents, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmd, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if err != nil || !bytes.Contains(cmd, []byte("containerd-shim")) {
			continue
		}
		args := strings.Split(string(cmd), "\x00")
		if i := slices.Index(args, "-id"); i >= 0 && i+1 < len(args) && ours[args[i+1]] {
			sum += procRSSMiB(pid)
		}
	}
	for _, id := range ids {
		for _, p := range []struct{ file, key string }{
			{"/sys/fs/cgroup/memory/docker/" + id + "/memory.stat", "total_rss "},
			{"/sys/fs/cgroup/system.slice/docker-" + id + ".scope/memory.stat", "anon "},
		} {
			if b, err := os.ReadFile(p.file); err == nil {
				for line := range strings.Lines(string(b)) {
					if v, ok := strings.CutPrefix(line, p.key); ok {
						n, _ := strconv.ParseFloat(strings.TrimSpace(v), 64)
						sum += n / (1 << 20)
					}
				}
			}
		}
	}
	return sum
}

// kBField is the value of a "Name:   123 kB" line of a /proc file.
func kBField(b []byte, name string) float64 {
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), name); ok {
			v, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 64)
			return v
		}
	}
	return 0
}

// cpuSeconds is utime+stime of process pid (/proc/<pid>/stat fields 14
// and 15, in clock ticks of 100 Hz, Linux's USER_HZ).
func cpuSeconds(t *testing.T, pid int) float64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	// The command may hold spaces: the fields follow its closing paren.
	fields := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	ut, _ := strconv.ParseFloat(fields[11], 64)
	st, _ := strconv.ParseFloat(fields[12], 64)
	return (ut + st) / 100
}

// dbBytes sums the SQLite files (database, WAL, shared memory) in the
// data directory.
func dbBytes(t *testing.T, dir string) int64 {
	t.Helper()
	var n int64
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.Type().IsRegular() && (strings.Contains(name, ".db") || strings.Contains(name, ".sqlite")) {
			info, err := d.Info()
			if err != nil {
				return err
			}
			n += info.Size()
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// saveProfiles writes the server's CPU profile over the steady window's
// first half and then its goroutines into dir (HOIST_MEASURE_PROFILES),
// read from /debug/pprof as an operator would: cpu.pprof for
// `go tool pprof`, goroutines.txt as text.
func saveProfiles(t *testing.T, s *server, dir string, steady time.Duration) {
	secs := max(int(steady.Seconds()/2), 5)
	for _, p := range []struct{ path, file string }{
		{fmt.Sprintf("/debug/pprof/profile?seconds=%d", secs), "cpu.pprof"},
		{"/debug/pprof/goroutine?debug=1", "goroutines.txt"},
	} {
		req, err := http.NewRequest(http.MethodGet, s.url+p.path, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+s.token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("profile %s: %v", p.path, err)
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("profile %s: %d %v", p.path, resp.StatusCode, err)
		}
		writeTestFile(t, filepath.Join(dir, p.file), string(b))
	}
}
