package local_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"
	"time"

	"hoist/agents/api"
	"hoist/backends"
	"hoist/backends/conformance"
	"hoist/backends/internal/agentbin"
	"hoist/backends/local"
	"hoist/backends/offers"
	"hoist/e2e/testenv"
)

func TestMain(m *testing.M) {
	code := m.Run()
	agentbin.Cleanup()
	os.Exit(code)
}

const testLabel = "hoist.test"

func newBackend(t *testing.T, stateDir string) *local.Backend {
	t.Helper()
	_, runner := agentbin.Build(t, runtime.GOARCH)
	b, err := local.New(local.Config{RunnerBinary: runner, StateDir: stateDir, Records: recordsFor(t, stateDir), Labels: map[string]string{testLabel: "backends-local"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

// removeContainers removes every container this package's tests created,
// also when a test failed half-way.
func removeContainers(t *testing.T) {
	t.Cleanup(func() {
		out, _ := exec.Command("docker", "ps", "-aq", "--filter", "label="+testLabel+"=backends-local").Output()
		if ids := strings.Fields(string(out)); len(ids) > 0 {
			_ = exec.Command("docker", append([]string{"rm", "-f"}, ids...)...).Run()
		}
	})
}

func TestConformance(t *testing.T) {
	testenv.Docker(t)
	removeContainers(t)
	dir := t.TempDir()
	b := newBackend(t, dir)
	conformance.Run(t, conformance.Options{
		Backend: b,
		// Another server on this host: its own state dir, the same records.
		Peer: func(t *testing.T) backends.Backend {
			peerDir := t.TempDir()
			shared := recordsFor(t, dir)
			recordsMu.Lock()
			recordsBy[peerDir] = shared
			recordsMu.Unlock()
			return newBackend(t, peerDir)
		},
		// Two small slices of this host fit next to each other.
		Spec: func(int) backends.InstanceSpec {
			os, err := b.Offers(t.Context(), offers.Query{CPU: offers.AtLeast(1), Memory: offers.AtLeast(0.25)})
			if err != nil || len(os) == 0 {
				t.Fatalf("no small offer: %v", err)
			}
			return backends.InstanceSpec{Offer: os[0]}
		},
		Timeout: 30 * time.Second,
	})
}

func TestOffers_sizedToTheQueryAndCapacity(t *testing.T) {
	_, runner := agentbin.Build(t, runtime.GOARCH)
	dir := t.TempDir()
	b, err := local.New(local.Config{RunnerBinary: runner, StateDir: dir, Records: recordsFor(t, dir)})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ctx := t.Context()
	availability := func() string {
		hs, _ := b.Offers(ctx, offers.Query{})
		if len(hs) != 1 {
			t.Fatalf("Offers(zero) holds %d offers, want this host", len(hs))
		}
		return hs[0].Availability
	}
	if got := availability(); got != offers.AvailabilityAvailable {
		t.Errorf("this host: %s before any instance, want available", got)
	}
	whole, err := b.Offers(ctx, offers.Query{})
	if err != nil || len(whole) != 1 {
		t.Fatalf("Offers(zero) = %v, %v", whole, err)
	}
	if whole[0].CPUs != runtime.NumCPU() || whole[0].MemoryGB < 0.5 || whole[0].DiskGB <= 0 {
		t.Errorf("whole-host offer does not describe this host: %+v", whole[0])
	}
	small, _ := b.Offers(ctx, offers.Query{CPU: offers.AtLeast(1), Memory: offers.AtLeast(0.5)})
	if len(small) != 1 || small[0].CPUs != 1 || small[0].MemoryGB != 0.5 {
		t.Fatalf("sized offer = %+v", small)
	}
	if got, _ := b.Offers(ctx, offers.Query{CPU: offers.AtLeast(float64(runtime.NumCPU() + 1))}); len(got) != 0 {
		t.Errorf("offer larger than the host: %+v", got)
	}
	if got, _ := b.Offers(ctx, offers.Query{GPUCount: offers.AtLeast(1)}); len(got) != 0 && whole[0].GPUCount == 0 {
		t.Errorf("GPU offer on a host without GPUs: %+v", got)
	}

	// The whole host taken, nothing else fits.
	if _, err := b.Create(ctx, backends.InstanceSpec{ID: "whole", Offer: whole[0]}); err != nil {
		t.Fatal(err)
	}
	defer b.Terminate(context.Background(), "whole")
	if got := availability(); got != offers.AvailabilityBusy {
		t.Errorf("this host: %s with an instance, want busy", got)
	}
	_, err = b.Create(ctx, backends.InstanceSpec{ID: "extra", Offer: small[0]})
	if !errors.Is(err, backends.ErrNoCapacity) || backends.KindOf(err) != backends.KindTransient {
		t.Errorf("Create beyond capacity = %v, want transient ErrNoCapacity", err)
	}
	if got, _ := b.Offers(ctx, offers.Query{CPU: offers.AtLeast(1)}); len(got) != 1 || got[0].Availability != offers.AvailabilityBusy {
		t.Errorf("offer on a full host = %+v, want busy", got)
	}

	// A gateway's instance reserves nothing: it fits next to the whole
	// host and leaves no less room than there was.
	gw, err := b.Create(ctx, backends.InstanceSpec{ID: "gateway", Offer: whole[0], Gateway: true})
	if err != nil {
		t.Fatalf("Create of a gateway's instance on a full host: %v", err)
	}
	defer b.Terminate(context.Background(), "gateway")
	if gw.Offer.CPUs != 0 || gw.Offer.MemoryGB != 0 || gw.Offer.GPUCount != 0 {
		t.Errorf("gateway's instance reserves %+v, want nothing", gw.Offer)
	}
	if err := b.Terminate(ctx, "whole"); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Create(ctx, backends.InstanceSpec{ID: "whole-again", Offer: whole[0]}); err != nil {
		t.Errorf("the whole host next to a gateway's instance: %v", err)
	}
	defer b.Terminate(context.Background(), "whole-again")
}

// TestTask_runsWithLimitsAndSurvivesRestart runs a job through the
// instance's shim, checks that the instance's size became Docker limits,
// and that a new backend on the same state dir recovers the instance.
func TestTask_runsWithLimitsAndSurvivesRestart(t *testing.T) {
	image := testenv.Docker(t)
	removeContainers(t)
	dir := t.TempDir()
	b := newBackend(t, dir)
	ctx := t.Context()
	os1, _ := b.Offers(ctx, offers.Query{CPU: offers.AtLeast(1), Memory: offers.AtLeast(0.5)})
	inst, err := b.Create(ctx, backends.InstanceSpec{ID: "job-host", Offer: os1[0], Tags: map[string]string{backends.TagProject: "p"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Terminate(context.Background(), inst.ID) })

	conn, err := b.Connect(ctx, inst)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	sc := api.NewShimClient(conn.ShimURL(), conn.HTTPClient())
	if _, err := sc.CreateTask(ctx, api.TaskSpec{ID: "t1", Image: image}); err != nil {
		t.Fatal(err)
	}
	info, err := sc.WaitTask(ctx, "t1", api.TaskRunning)
	if err != nil || info.Status != api.TaskRunning {
		t.Fatalf("task not running: %+v, %v", info, err)
	}
	out, err := exec.Command("docker", "inspect", "--format", "{{.HostConfig.NanoCpus}} {{.HostConfig.Memory}} {{index .Config.Labels \"hoist.project\"}}", info.ContainerID).Output()
	if err != nil {
		t.Fatal(err)
	}
	if got, want := strings.TrimSpace(string(out)), "1000000000 536870912 p"; got != want {
		t.Errorf("container limits and labels = %q, want %q", got, want)
	}
	rc := api.NewRunnerClient(info.RunnerAddr, conn.HTTPClient())
	if err := rc.Submit(ctx, api.JobSpec{Commands: []string{"echo hello from local"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := rc.Run(ctx); err != nil {
		t.Fatal(err)
	}
	st, err := rc.Wait(ctx)
	if err != nil || !st.Finished() {
		t.Fatalf("job: %+v, %v", st, err)
	}
	lines, err := rc.Logs(ctx, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	var text strings.Builder
	for _, l := range lines {
		text.Write(l.Data)
	}
	if !strings.Contains(text.String(), "hello from local") {
		t.Errorf("logs = %q", text.String())
	}

	// A server restart: a new backend on the same state dir knows the
	// instance and its task.
	b.Close()
	b2 := newBackend(t, dir)
	got, err := b2.Describe(ctx, inst.ID)
	if err != nil || got.Status != backends.StatusRunning || got.Tags[backends.TagProject] != "p" {
		t.Fatalf("after restart: %+v, %v", got, err)
	}
	conn2, err := b2.Connect(ctx, got)
	if err != nil {
		t.Fatal(err)
	}
	defer conn2.Close()
	if _, err := api.NewShimClient(conn2.ShimURL(), conn2.HTTPClient()).GetTask(ctx, "t1"); err != nil {
		t.Errorf("task lost across restart: %v", err)
	}
	if err := b2.Terminate(ctx, inst.ID); err != nil {
		t.Fatal(err)
	}
	if out, _ := exec.Command("docker", "ps", "-aq", "--filter", "id="+info.ContainerID).Output(); strings.TrimSpace(string(out)) != "" {
		t.Errorf("container %s left after terminate", info.ContainerID)
	}
}

// TestConn_authenticatesToTheAgentsOnly checks the tokens end to end: the
// instance's shim and its task's runner answer 401 to a plain client and
// work through Conn's client, which sends nothing of ours to a job's own
// service on the same host.
func TestConn_authenticatesToTheAgentsOnly(t *testing.T) {
	image := testenv.Docker(t)
	removeContainers(t)
	b := newBackend(t, t.TempDir())
	ctx := t.Context()
	inst, err := b.Create(ctx, backends.InstanceSpec{ID: "auth-host"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Terminate(context.Background(), inst.ID) })
	conn, err := b.Connect(ctx, inst)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := api.NewShimClient(conn.ShimURL(), nil).TaskList(ctx); !errors.Is(err, api.ErrUnauthorized) {
		t.Fatalf("shim without token: %v, want 401", err)
	}
	sc := api.NewShimClient(conn.ShimURL(), conn.HTTPClient())
	if _, err := sc.CreateTask(ctx, api.TaskSpec{ID: "svc", Image: image, Ports: []api.PortMapping{{Container: 8080}}}); err != nil {
		t.Fatal(err)
	}
	info, err := sc.WaitTask(ctx, "svc", api.TaskRunning)
	if err != nil || info.Status != api.TaskRunning || len(info.Ports) != 1 {
		t.Fatalf("task not running: %+v, %v", info, err)
	}
	if _, err := api.NewRunnerClient(info.RunnerAddr, nil).State(ctx); !errors.Is(err, api.ErrUnauthorized) {
		t.Fatalf("runner without token: %v, want 401", err)
	}
	rc := api.NewRunnerClient(info.RunnerAddr, conn.HTTPClient())
	// The job is an HTTP server that prints each request it gets; nc keeps
	// reading for a while after answering, so each request is whole. It
	// serves again after each connection: a probe that reached Docker's
	// port proxy before nc listened must not use up the only answer.
	job := api.JobSpec{Commands: []string{`while true; do (printf 'HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok'; sleep 2) | nc -l -p 8080; done`}}
	if err := rc.Submit(ctx, job); err != nil {
		t.Fatal(err)
	}
	if _, err := rc.Run(ctx); err != nil {
		t.Fatal(err)
	}
	svc := fmt.Sprintf("http://127.0.0.1:%d/", info.Ports[0].Host)
	// Ask the service through the instance's client until the job has
	// printed a whole request: a request can be lost to Docker's port proxy
	// while nc restarts, so each round sends a new one.
	deadline := time.Now().Add(60 * time.Second)
	var got strings.Builder
	for !strings.Contains(got.String(), "\r\n\r\n") {
		if time.Now().After(deadline) {
			t.Fatalf("the job's service at %s printed no whole request; output %q", svc, got.String())
		}
		if resp, err := conn.HTTPClient().Get(svc); err == nil {
			resp.Body.Close()
		}
		time.Sleep(200 * time.Millisecond)
		lines, err := rc.Logs(ctx, 0, 1000)
		if err != nil {
			t.Fatal(err)
		}
		got.Reset()
		for _, l := range lines {
			got.Write(l.Data)
		}
	}
	if !strings.Contains(got.String(), "GET / HTTP/1.1") || strings.Contains(strings.ToLower(got.String()), "authorization") {
		t.Errorf("the job's service got %q, want a request without our tokens", got.String())
	}
}
