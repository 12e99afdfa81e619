package sshfleet_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"hoist/agents/api"
	"hoist/backends"
	"hoist/backends/conformance"
	"hoist/backends/internal/agentbin"
	"hoist/backends/internal/drivertest"
	"hoist/backends/offers"
	"hoist/backends/sshfleet"
	"hoist/backends/tunnel"
	"hoist/e2e/testenv"
)

func TestMain(m *testing.M) { drivertest.Main(m) }

const testLabel = "hoist.test"

// fleet is an SSH fleet of real sshd hosts on loopback addresses of this
// machine, and the backend managing it.
type fleet struct {
	b      *sshfleet.Backend
	hosts  []*testenv.SSHD
	key    []byte
	state  string
	recs   backends.Records
	remote string
	image  string
	user   string
}

func newFleet(t *testing.T, n int) *fleet {
	t.Helper()
	image := testenv.Docker(t)
	clientKey := testenv.NewSSHKey(t, t.TempDir(), "client")
	client, pemKey := clientKey.Signer, clientKey.PEM
	f := &fleet{key: pemKey, state: t.TempDir(), recs: drivertest.Records(t), remote: t.TempDir(), image: image, user: testenv.LoginUser(t)}
	for i := range n {
		f.hosts = append(f.hosts, testenv.StartSSHD(t, "127.0.0."+strconv.Itoa(i+2), client.PublicKey()))
	}
	// Runs before the sshd are killed (cleanups run last-in first-out).
	t.Cleanup(func() { f.reap(t) })
	f.b = f.open(t)
	return f
}

// open returns a backend on the fleet's state dir (a server (re)start).
func (f *fleet) open(t *testing.T) *sshfleet.Backend {
	t.Helper()
	b, err := sshfleet.New(sshfleet.Config{
		StateDir: f.state, Records: f.recs, Agents: agentbin.Agents, RemoteDir: f.remote,
		DialTimeout: 2 * time.Second, HandshakeTimeout: 3 * time.Second, KeepAlive: time.Second,
		DrainGrace: 2 * time.Second, Logger: testLogger(t),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

func (f *fleet) spec(i int, id string) backends.InstanceSpec {
	h := f.hosts[i]
	return backends.InstanceSpec{
		ID:   id,
		Host: &backends.SSHHost{Hostname: h.IP, Port: h.Port, User: f.user, PrivateKey: f.key},
		Tags: map[string]string{testLabel: "backends-sshfleet", backends.TagInstance: id},
	}
}

// reap stops what the fleet's hosts still run (supervisors and shims under
// the test's remote dir) and removes the test's containers, also when a test
// failed half-way.
func (f *fleet) reap(t *testing.T) {
	pids, _ := filepath.Glob(filepath.Join(f.remote, "*", "*.pid"))
	for _, p := range pids {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && pid > 1 {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
	out, _ := exec.Command("docker", "ps", "-aq", "--filter", "label="+testLabel+"=backends-sshfleet").Output()
	if ids := strings.Fields(string(out)); len(ids) > 0 {
		_ = exec.Command("docker", append([]string{"rm", "-f"}, ids...)...).Run()
	}
}

func TestConformance(t *testing.T) {
	f := newFleet(t, 2)
	conformance.Run(t, conformance.Options{
		Backend:  f.b,
		Spec:     func(i int) backends.InstanceSpec { return f.spec(i, "") },
		Capacity: 2,
		Timeout:  time.Minute,
		// Another server: a fresh backend on the same records.
		Peer: func(t *testing.T) backends.Backend {
			p, err := sshfleet.New(sshfleet.Config{Records: f.recs, Agents: agentbin.Agents, RemoteDir: f.remote, Logger: testLogger(t)})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { p.Close() })
			return p
		},
	})
}

// runJob runs commands in a busybox task through the instance's shim and
// returns the job's output.
func runJob(t *testing.T, ctx context.Context, c backends.Connector, inst backends.Instance, taskID, image string, commands ...string) string {
	t.Helper()
	conn, err := c.Connect(ctx, inst)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	sc := api.NewShimClient(conn.ShimURL(), conn.HTTPClient())
	if _, err := sc.CreateTask(ctx, api.TaskSpec{ID: taskID, Image: image, Labels: map[string]string{testLabel: "backends-sshfleet"}}); err != nil {
		t.Fatal(err)
	}
	info, err := sc.WaitTask(ctx, taskID, api.TaskRunning)
	if err != nil || info.Status != api.TaskRunning {
		t.Fatalf("task %s on %s: %+v, %v", taskID, inst.ID, info, err)
	}
	rc := api.NewRunnerClient(info.RunnerAddr, conn.HTTPClient())
	if err := rc.Submit(ctx, api.JobSpec{Commands: commands}); err != nil {
		t.Fatal(err)
	}
	if _, err := rc.Run(ctx); err != nil {
		t.Fatal(err)
	}
	st, err := rc.Wait(ctx)
	if err != nil || !st.Finished() {
		t.Fatalf("job on %s: %+v, %v", inst.ID, st, err)
	}
	lines, err := rc.Logs(ctx, 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	for _, l := range lines {
		out.Write(l.Data)
	}
	return out.String()
}

func TestFleet_deploysShimsAndRunsTasksOnTwoHosts(t *testing.T) {
	f := newFleet(t, 2)
	ctx := t.Context()
	var insts []backends.Instance
	for i := range f.hosts {
		spec := f.spec(i, "host-"+strconv.Itoa(i))
		wantIP := f.hosts[i].IP // a host's internal IP is its address ...
		if i == 0 {
			// ... or the fleet spec's internal_ip.
			spec.Host.InternalIP, wantIP = "10.1.2.3", "10.1.2.3"
		}
		inst, err := f.b.Create(ctx, spec)
		if err != nil {
			t.Fatal(err)
		}
		if inst.Status != backends.StatusRunning || inst.HostKey != tunnel.MarshalHostKey(f.hosts[i].HostKey()) {
			t.Fatalf("host %d: status %q, host key %q (want the sshd's, recorded on first contact)", i, inst.Status, inst.HostKey)
		}
		if inst.InternalIP != wantIP {
			t.Errorf("host %d: internal IP %q, want %q", i, inst.InternalIP, wantIP)
		}
		insts = append(insts, inst)
		t.Cleanup(func() { _ = f.b.Terminate(context.Background(), inst.ID) })
	}
	// Each host's offer is what its shim says of it (agents/hostinfo).
	if o := insts[0].Offer; o.Backend != f.b.Name() || o.CPUs != runtime.NumCPU() || o.MemoryGB <= 0 || o.DiskGB <= 0 {
		t.Errorf("host 0's offer = %+v, want this machine's CPUs, memory and disk", o)
	}
	if all, err := f.b.Offers(ctx, offers.Query{}); err != nil || len(all) != 2 {
		t.Errorf("Offers = %d offers, %v; want one per host", len(all), err)
	}
	if _, err := f.b.Create(ctx, f.spec(1, "host-0")); !backends.IsStalled(err) {
		t.Errorf("Create of host-0 on the other host = %v; want stalled (an instance keeps its host)", err)
	}
	for i, inst := range insts {
		out := runJob(t, ctx, f.b, inst, "task-"+strconv.Itoa(i), f.image, "echo hello from $(hostname) job "+strconv.Itoa(i))
		if !strings.Contains(out, "job "+strconv.Itoa(i)) {
			t.Errorf("host %d: job output %q", i, out)
		}
	}

	// The shim runs under its supervisor, not under the SSH connection: a
	// server restart (new backend, every SSH connection closed) finds it
	// still running with its tasks, and a crashed shim is restarted.
	f.b.Close()
	b2 := f.open(t)
	got, err := b2.Describe(ctx, insts[0].ID)
	if err != nil || got.Status != backends.StatusRunning {
		t.Fatalf("after reconnect: %+v, %v", got, err)
	}
	// A Conn taken before the shim crashes keeps working after its restart
	// (on another port).
	conn, err := b2.Connect(ctx, got)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	shimPid := readPid(t, filepath.Join(f.remote, insts[0].ID, "shim.pid"))
	if err := syscall.Kill(shimPid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		got, err = b2.Describe(ctx, insts[0].ID)
		if err == nil && got.Status == backends.StatusRunning && readPid(t, filepath.Join(f.remote, insts[0].ID, "shim.pid")) != shimPid {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("shim not restarted by its supervisor: %+v, %v", got, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if task, err := api.NewShimClient(conn.ShimURL(), conn.HTTPClient()).GetTask(ctx, "task-0"); err != nil || task.ContainerID == "" {
		t.Errorf("restarted shim lost its task: %+v, %v", task, err)
	}
}

func readPid(t *testing.T, path string) int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	return pid
}

func TestFleet_changedHostKeyIsRefused(t *testing.T) {
	f := newFleet(t, 1)
	ctx := t.Context()
	inst, err := f.b.Create(ctx, f.spec(0, "rekeyed"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.b.Terminate(context.Background(), inst.ID) })
	first := inst.HostKey

	f.hosts[0].RestartWithNewKey(t)
	waitDisconnected(t, f.b, inst.ID)
	got, err := f.b.Describe(ctx, inst.ID)
	if !errors.Is(err, backends.ErrHostKeyMismatch) || !backends.IsStalled(err) {
		t.Fatalf("Describe after a host key change = %+v, %v; want stalled ErrHostKeyMismatch", got, err)
	}
	if got.HostKey != first || !strings.Contains(got.Message, "host key") {
		t.Errorf("instance after refusal: key %q (want the recorded %q), message %q", got.HostKey, first, got.Message)
	}
	if _, err := f.b.Create(ctx, f.spec(0, "rekeyed")); !errors.Is(err, backends.ErrHostKeyMismatch) {
		t.Errorf("Create after a host key change = %v; want ErrHostKeyMismatch", err)
	}
	if _, err := f.b.Connect(ctx, got); !backends.IsStalled(err) {
		t.Errorf("Connect after a host key change = %v; want stalled", err)
	}
	// Pinning the new key in the spec (the user's decision) lets it through.
	spec := f.spec(0, "rekeyed")
	spec.Host.HostKeys = []string{tunnel.MarshalHostKey(f.hosts[0].HostKey())}
	if inst, err = f.b.Create(ctx, spec); err != nil || inst.Status != backends.StatusRunning {
		t.Fatalf("Create with the new key pinned: %+v, %v", inst, err)
	}

	// A host pinned by known_hosts content from the start.
	f2 := spec
	f2.ID = "known-hosts"
	f2.Host = &backends.SSHHost{Hostname: f.hosts[0].IP, Port: f.hosts[0].Port, User: testenv.LoginUser(t), PrivateKey: f.key,
		KnownHosts: "[" + f.hosts[0].IP + "]:" + strconv.Itoa(f.hosts[0].Port) + " " + tunnel.MarshalHostKey(newSignerPub(t)) + "\n"}
	if _, err := f.b.Create(ctx, f2); !errors.Is(err, backends.ErrHostKeyMismatch) {
		t.Errorf("Create against a known_hosts entry of another key = %v", err)
	}
	if l, _ := f.b.List(ctx, map[string]string{backends.TagInstance: "known-hosts"}); len(l) != 0 {
		t.Errorf("a refused host left a record: %+v", l)
	}
}

func newSignerPub(t *testing.T) ssh.PublicKey {
	s := testenv.NewSSHKey(t, t.TempDir(), "other").Signer
	return s.PublicKey()
}

// waitDisconnected waits until the backend's pooled connection to id is
// gone (keepalive fails once sshd and its connection processes are killed).
func waitDisconnected(t *testing.T, b *sshfleet.Backend, id string) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for b.Connected(id) {
		if time.Now().After(deadline) {
			t.Fatal("the SSH connection survived its sshd")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestFleet_removedHostIsDrained(t *testing.T) {
	f := newFleet(t, 1)
	ctx := t.Context()
	inst, err := f.b.Create(ctx, f.spec(0, "drained"))
	if err != nil {
		t.Fatal(err)
	}
	conn, err := f.b.Connect(ctx, inst)
	if err != nil {
		t.Fatal(err)
	}
	sc := api.NewShimClient(conn.ShimURL(), conn.HTTPClient())
	if _, err := sc.CreateTask(ctx, api.TaskSpec{ID: "long", Image: f.image, Labels: map[string]string{testLabel: "backends-sshfleet"}}); err != nil {
		t.Fatal(err)
	}
	info, err := sc.WaitTask(ctx, "long", api.TaskRunning)
	if err != nil || info.Status != api.TaskRunning {
		t.Fatalf("task: %+v, %v", info, err)
	}
	rc := api.NewRunnerClient(info.RunnerAddr, conn.HTTPClient())
	if err := rc.Submit(ctx, api.JobSpec{Commands: []string{"sleep 600"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := rc.Run(ctx); err != nil {
		t.Fatal(err)
	}
	conn.Close()
	supervisor := readPid(t, filepath.Join(f.remote, "drained", "supervisor.pid"))

	start := time.Now()
	if err := f.b.Terminate(ctx, inst.ID); err != nil {
		t.Fatal(err)
	}
	t.Logf("drained in %s", time.Since(start))
	if out, _ := exec.Command("docker", "ps", "-aq", "--filter", "id="+info.ContainerID).Output(); strings.TrimSpace(string(out)) != "" {
		t.Errorf("the task's container %s is still there", info.ContainerID)
	}
	if supervisor == 0 || alive(supervisor) {
		t.Errorf("supervisor %d still running", supervisor)
	}
	if _, err := os.Stat(filepath.Join(f.remote, "drained")); !os.IsNotExist(err) {
		t.Errorf("instance dir left on the host: %v", err)
	}
	if _, err := f.b.Describe(ctx, inst.ID); !errors.Is(err, backends.ErrNotFound) {
		t.Errorf("Describe after drain = %v", err)
	}
}

func TestFleet_killedSSHDIsUnreachable(t *testing.T) {
	f := newFleet(t, 1)
	ctx := t.Context()
	inst, err := f.b.Create(ctx, f.spec(0, "flaky"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.b.Terminate(context.Background(), inst.ID) })

	kept, err := f.b.Connect(ctx, inst)
	if err != nil {
		t.Fatal(err)
	}
	defer kept.Close()
	f.hosts[0].Kill()
	waitDisconnected(t, f.b, inst.ID)
	if _, err := api.NewShimClient(kept.ShimURL(), kept.HTTPClient()).Health(ctx); !errors.Is(err, backends.ErrUnreachable) {
		t.Errorf("a kept Conn to a dead host = %v; want ErrUnreachable", err)
	}
	got, err := f.b.Describe(ctx, inst.ID)
	if err != nil || !got.Unreachable || got.Message == "" {
		t.Fatalf("Describe of a dead host = %+v, %v; want Unreachable with a reason", got, err)
	}
	_, err = f.b.Connect(ctx, got)
	if !errors.Is(err, backends.ErrUnreachable) || backends.KindOf(err) != backends.KindTransient {
		t.Errorf("Connect to a dead host = %v; want transient ErrUnreachable", err)
	}
	_, err = f.b.Create(ctx, f.spec(0, "flaky"))
	if !errors.Is(err, backends.ErrUnreachable) {
		t.Errorf("Create on a dead host = %v; want ErrUnreachable", err)
	}

	// The host comes back (same key): the instance is reachable again and
	// its shim never stopped.
	f.hosts[0].Restart(t)
	got, err = f.b.Describe(ctx, inst.ID)
	if err != nil || got.Unreachable || got.Status != backends.StatusRunning {
		t.Fatalf("Describe after the host came back = %+v, %v", got, err)
	}
	if _, err := api.NewShimClient(kept.ShimURL(), kept.HTTPClient()).Health(ctx); err != nil {
		t.Errorf("the kept Conn after the host came back: %v", err)
	}

	// Terminating a dead host is retried until it answers.
	f.hosts[0].Kill()
	waitDisconnected(t, f.b, inst.ID)
	if err := f.b.Terminate(ctx, inst.ID); !errors.Is(err, backends.ErrUnreachable) || backends.KindOf(err) != backends.KindTransient {
		t.Errorf("Terminate of a dead host = %v; want transient ErrUnreachable", err)
	}
	f.hosts[0].Restart(t)
	if err := f.b.Terminate(ctx, inst.ID); err != nil {
		t.Errorf("retried Terminate = %v", err)
	}
}

func testLogger(t *testing.T) *slog.Logger {
	if os.Getenv("HOIST_TEST_LOG") == "" {
		return nil
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// alive reports whether pid runs (a zombie waiting for a reaper that never
// comes does not count).
func alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i >= 0 && len(s) > i+2 && s[i+2] != 'Z'
}

func TestFleet_proxyJump(t *testing.T) {
	f := newFleet(t, 2)
	ctx := t.Context()
	spec := f.spec(1, "jumped")
	jump := f.hosts[0]
	spec.Host.ProxyJump = &backends.SSHHost{Hostname: jump.IP, Port: jump.Port, User: testenv.LoginUser(t), PrivateKey: f.key}
	inst, err := f.b.Create(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.b.Terminate(context.Background(), inst.ID) })
	if inst.Status != backends.StatusRunning || inst.HostKey != tunnel.MarshalHostKey(f.hosts[1].HostKey()) {
		t.Fatalf("through the jump host: status %q, host key %q (want host 1's)", inst.Status, inst.HostKey)
	}
	out := runJob(t, ctx, f.b, inst, "jumped-task", f.image, "echo through the jump host")
	if !strings.Contains(out, "through the jump host") {
		t.Errorf("job output %q", out)
	}

	// The jump host's key was recorded too: a new key there is refused.
	jump.RestartWithNewKey(t)
	waitDisconnected(t, f.b, inst.ID)
	if _, err := f.b.Describe(ctx, inst.ID); !errors.Is(err, backends.ErrHostKeyMismatch) {
		t.Errorf("Describe after the jump host's key changed = %v; want ErrHostKeyMismatch", err)
	}
	jump.Kill() // cleanup terminates through a working jump host: give it back its key
	spec.Host.ProxyJump.HostKeys = []string{tunnel.MarshalHostKey(jump.HostKey())}
	jump.Restart(t)
	if _, err := f.b.Create(ctx, spec); err != nil {
		t.Errorf("Create with the jump host's new key pinned: %v", err)
	}
}

// TestFleet_incompatibleShimIsReplaced puts an agent of another API version
// in place of the shim (busybox httpd answering the health check without
// hoist's version header) and checks that Describe replaces it.
func TestFleet_incompatibleShimIsReplaced(t *testing.T) {
	bb := testenv.Require(t, "busybox")
	f := newFleet(t, 1)
	ctx := t.Context()
	inst, err := f.b.Create(ctx, f.spec(0, "old-agent"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.b.Terminate(context.Background(), inst.ID) })

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	dir := filepath.Join(f.remote, inst.ID)
	fake := "#!/bin/sh\nmkdir -p www/api && echo '{\"service\":\"dstack-shim\",\"version\":\"0.19.0\"}' > www/api/healthcheck\n" +
		"echo " + addr + " > shim.addr\nexec " + bb + " httpd -f -p " + addr + " -h www\n"
	if err := os.WriteFile(filepath.Join(dir, "bin", "hoist-shim.new"), []byte(fake), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(dir, "bin", "hoist-shim.new"), filepath.Join(dir, "bin", "hoist-shim")); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(readPid(t, filepath.Join(dir, "shim.pid")), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	// Wait for the supervisor to start the impostor.
	deadline := time.Now().Add(15 * time.Second)
	for {
		if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the supervisor did not start the replaced binary")
		}
		time.Sleep(50 * time.Millisecond)
	}
	got, err := f.b.Describe(ctx, inst.ID)
	if err != nil || got.Status != backends.StatusRunning {
		t.Fatalf("Describe with an incompatible shim = %+v, %v; want it replaced and running", got, err)
	}
	conn, err := f.b.Connect(ctx, got)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	h, err := api.NewShimClient(conn.ShimURL(), conn.HTTPClient()).Health(ctx)
	if err != nil || h.APIVersion != api.ShimAPIVersion {
		t.Errorf("after the replacement: %+v, %v", h, err)
	}
}

// TestFleet_drainWithoutShimRemovesLabelledContainers kills the supervisor
// and the shim of a host with a running task: Describe starts them again;
// killed once more, Terminate cannot drain through the shim and removes the
// containers labelled with the instance instead.
func TestFleet_drainWithoutShimRemovesLabelledContainers(t *testing.T) {
	f := newFleet(t, 1)
	ctx := t.Context()
	inst, err := f.b.Create(ctx, f.spec(0, "orphan"))
	if err != nil {
		t.Fatal(err)
	}
	conn, err := f.b.Connect(ctx, inst)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	sc := api.NewShimClient(conn.ShimURL(), conn.HTTPClient())
	if _, err := sc.CreateTask(ctx, api.TaskSpec{ID: "left", Image: f.image, Labels: map[string]string{testLabel: "backends-sshfleet"}}); err != nil {
		t.Fatal(err)
	}
	info, err := sc.WaitTask(ctx, "left", api.TaskRunning)
	if err != nil || info.ContainerID == "" {
		t.Fatalf("task: %+v, %v", info, err)
	}
	dir := filepath.Join(f.remote, "orphan")
	killAgents := func() {
		_ = syscall.Kill(readPid(t, filepath.Join(dir, "supervisor.pid")), syscall.SIGKILL)
		_ = syscall.Kill(readPid(t, filepath.Join(dir, "shim.pid")), syscall.SIGKILL)
	}

	// A host that lost its supervisor (a reboot): Describe starts it again
	// and the new shim still knows the task.
	killAgents()
	got, err := f.b.Describe(ctx, inst.ID)
	if err != nil || got.Status != backends.StatusRunning {
		t.Fatalf("Describe after the agents died = %+v, %v; want the supervisor restarted", got, err)
	}
	if task, err := sc.GetTask(ctx, "left"); err != nil || task.ContainerID != info.ContainerID {
		t.Errorf("the restarted shim lost the task: %+v, %v", task, err)
	}

	killAgents()
	if err := f.b.Terminate(ctx, inst.ID); err != nil {
		t.Fatal(err)
	}
	if out, _ := exec.Command("docker", "ps", "-aq", "--filter", "id="+info.ContainerID).Output(); strings.TrimSpace(string(out)) != "" {
		t.Errorf("container %s of a shim that could not drain is still there", info.ContainerID)
	}
}

func TestFactory_options(t *testing.T) {
	f := newFleet(t, 1)
	h := f.hosts[0]
	dir := t.TempDir()
	keyFile := filepath.Join(dir, "id")
	if err := os.WriteFile(keyFile, f.key, 0o600); err != nil {
		t.Fatal(err)
	}
	knownHosts := func(k ssh.PublicKey) string {
		p := filepath.Join(t.TempDir(), "known_hosts")
		line := "[" + h.IP + "]:" + strconv.Itoa(h.Port) + " " + tunnel.MarshalHostKey(k) + "\n"
		if err := os.WriteFile(p, []byte(line), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	open := func(opts string) (backends.Backend, error) {
		return sshfleet.Factory(backends.Config{Name: "ssh", Type: "ssh", Options: []byte(opts)},
			backends.Deps{StateDir: t.TempDir(), Records: drivertest.Records(t), Agents: agentbin.Agents})
	}
	for _, bad := range []string{`{"identity_fil": "x"}`, `{"identity_file": "/nonexistent"}`, `{"connect_timeout": "soon"}`, `{"known_hosts_file": "/nonexistent"}`} {
		if _, err := open(bad); err == nil {
			t.Errorf("options %s accepted", bad)
		}
	}
	ctx := t.Context()
	spec := backends.InstanceSpec{ID: "by-config", Host: &backends.SSHHost{Hostname: h.IP, Port: h.Port, User: testenv.LoginUser(t)},
		Tags: map[string]string{testLabel: "backends-sshfleet", backends.TagInstance: "by-config"}}

	wrong, err := open(`{"remote_dir": "` + f.remote + `", "identity_file": "` + keyFile + `", "known_hosts_file": "` + knownHosts(newSignerPub(t)) + `"}`)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := wrong.Create(ctx, spec); !errors.Is(err, backends.ErrHostKeyMismatch) {
		t.Errorf("Create against the config's known_hosts of another key = %v", err)
	}

	b, err := open(`{"remote_dir": "` + f.remote + `", "identity_file": "` + keyFile + `", "known_hosts_file": "` + knownHosts(h.HostKey()) + `"}`)
	if err != nil {
		t.Fatal(err)
	}
	defer b.(*sshfleet.Backend).Close()
	inst, err := b.Create(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Terminate(context.Background(), inst.ID) })
	if inst.Status != backends.StatusRunning {
		t.Errorf("host reached with the config's key and known_hosts: %+v", inst)
	}
}

// TestFleet_shimTokenIsDeployedAndRenewed checks the shim's token: made by
// the server, kept in the record and on the host (mode 0600), and demanded by
// the shim; a record without one (made before tokens existed) gets a new one
// on the next Describe, which restarts the host's supervisor with it.
func TestFleet_shimTokenIsDeployedAndRenewed(t *testing.T) {
	f := newFleet(t, 1)
	ctx := t.Context()
	inst, err := f.b.Create(ctx, f.spec(0, "token"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.b.Terminate(context.Background(), inst.ID) })
	tokenPath := filepath.Join(f.remote, inst.ID, "token")
	recordToken := func() string {
		t.Helper()
		b, ok, err := f.recs.GetBackendRecord(ctx, "ssh", inst.ID)
		if err != nil || !ok {
			t.Fatalf("record of %s: %v (found %v)", inst.ID, err, ok)
		}
		var r struct {
			ShimToken string `json:"shim_token"`
		}
		if err := json.Unmarshal(b, &r); err != nil {
			t.Fatal(err)
		}
		return r.ShimToken
	}
	hostToken := func() string {
		t.Helper()
		fi, err := os.Stat(tokenPath)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: mode %v, want 0600", tokenPath, fi.Mode().Perm())
		}
		b, _ := os.ReadFile(tokenPath)
		return strings.TrimSpace(string(b))
	}
	first := recordToken()
	if len(first) != 64 || hostToken() != first {
		t.Fatalf("record token %q, host token %q: want the same 32 random bytes in hex", first, hostToken())
	}
	addr, err := os.ReadFile(filepath.Join(f.remote, inst.ID, "shim.addr"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := api.NewShimClient(strings.TrimSpace(string(addr)), nil).Health(ctx); !errors.Is(err, api.ErrUnauthorized) {
		t.Errorf("the host's shim without token: %v, want 401", err)
	}

	// A server restart on a record without a token.
	f.b.Close()
	raw, _, err := f.recs.GetBackendRecord(ctx, "ssh", inst.ID)
	if err != nil {
		t.Fatal(err)
	}
	var rec map[string]any
	if err := json.Unmarshal(raw, &rec); err != nil {
		t.Fatal(err)
	}
	delete(rec, "shim_token")
	raw, _ = json.Marshal(rec)
	if err := f.recs.PutBackendRecord(ctx, "ssh", inst.ID, raw); err != nil {
		t.Fatal(err)
	}
	b2 := f.open(t)
	got, err := b2.Describe(ctx, inst.ID)
	if err != nil || got.Status != backends.StatusRunning {
		t.Fatalf("Describe on a record without token = %+v, %v; want a new token and running", got, err)
	}
	second := recordToken()
	if len(second) != 64 || second == first || hostToken() != second {
		t.Fatalf("after renewal: record token %q (was %q), host token %q", second, first, hostToken())
	}
	conn, err := b2.Connect(ctx, got)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := api.NewShimClient(conn.ShimURL(), conn.HTTPClient()).TaskList(ctx); err != nil {
		t.Errorf("TaskList through Conn after renewal: %v", err)
	}
}

// TestFleet_forgetDropsADeadHost checks Forget, which the cloud-VM engine
// calls for a VM it deletes: the instance goes from the records without the
// host being contacted (here it is dead), and a second Forget is a no-op.
func TestFleet_forgetDropsADeadHost(t *testing.T) {
	f := newFleet(t, 1)
	ctx := t.Context()
	inst, err := f.b.Create(ctx, f.spec(0, "doomed"))
	if err != nil {
		t.Fatal(err)
	}
	f.hosts[0].Kill()
	waitDisconnected(t, f.b, inst.ID)
	for range 2 {
		if err := f.b.Forget(inst.ID); err != nil {
			t.Fatalf("Forget: %v", err)
		}
	}
	if _, err := f.b.Describe(ctx, inst.ID); !errors.Is(err, backends.ErrNotFound) {
		t.Errorf("Describe after Forget = %v, want ErrNotFound", err)
	}
	if got, err := f.b.List(ctx, nil); err != nil || len(got) != 0 {
		t.Errorf("List after Forget = %+v, %v; want none", got, err)
	}
	if _, ok, err := f.recs.GetBackendRecord(ctx, "ssh", inst.ID); ok || err != nil {
		t.Errorf("the record after Forget: present %v, %v", ok, err)
	}
}

// TestFleet_sshAccessDialsTheHost checks HostAccess: the login SSHAccess
// returns for a host reached through a jump host, both named by an identity
// file and first contacted without a pinned key, carries the keys read and
// the host keys recorded, and dials both strictly.
func TestFleet_sshAccessDialsTheHost(t *testing.T) {
	f := newFleet(t, 2)
	ctx := t.Context()
	keyFile := filepath.Join(t.TempDir(), "id_ed25519")
	if err := os.WriteFile(keyFile, f.key, 0o600); err != nil {
		t.Fatal(err)
	}
	spec := f.spec(1, "access")
	spec.Host.PrivateKey, spec.Host.IdentityFile = nil, keyFile
	jump := f.hosts[0]
	spec.Host.ProxyJump = &backends.SSHHost{Hostname: jump.IP, Port: jump.Port, User: f.user, IdentityFile: keyFile}
	if _, err := f.b.SSHAccess(ctx, backends.Instance{ID: spec.ID}); !errors.Is(err, backends.ErrNotFound) {
		t.Errorf("SSHAccess before Create = %v, want ErrNotFound", err)
	}
	inst, err := f.b.Create(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.b.Terminate(context.Background(), inst.ID) })

	h, err := f.b.SSHAccess(ctx, inst)
	if err != nil {
		t.Fatal(err)
	}
	if h.Hostname != f.hosts[1].IP || h.Port != f.hosts[1].Port || h.User != f.user || string(h.PrivateKey) != string(f.key) {
		t.Errorf("access = %s@%s:%d with %d bytes of key; want host 1's login and the identity file's key", h.User, h.Hostname, h.Port, len(h.PrivateKey))
	}
	if want := tunnel.MarshalHostKey(f.hosts[1].HostKey()); len(h.HostKeys) != 1 || h.HostKeys[0] != want {
		t.Errorf("access host keys = %q, want the one recorded at first contact %q", h.HostKeys, want)
	}
	if h.ProxyJump == nil || len(h.ProxyJump.HostKeys) != 1 || h.ProxyJump.HostKeys[0] != tunnel.MarshalHostKey(jump.HostKey()) {
		t.Fatalf("access proxy jump = %+v; want the jump host with its recorded key", h.ProxyJump)
	}
	c := drivertest.DialAccess(t, h)
	out, err := c.Run(ctx, `echo "$SSH_CONNECTION"`, nil)
	if err != nil {
		t.Fatal(err)
	}
	if fields := strings.Fields(string(out)); len(fields) != 4 || fields[2] != f.hosts[1].IP {
		t.Errorf("SSH_CONNECTION on the host = %q; want a connection to %s", out, f.hosts[1].IP)
	}
}

// TestFleet_terminateStopsTheGateway checks that a gateway process started
// on a host (StartGatewayProcess, as the cloud-VM engine does) runs under its
// supervisor with its listeners disabled when no port is given, and that
// Terminate stops it with the shim before removing the instance directory.
func TestFleet_terminateStopsTheGateway(t *testing.T) {
	f := newFleet(t, 1)
	ctx := t.Context()
	bin := drivertest.GatewayBinary(t, runtime.GOARCH)
	if _, err := f.b.StartGatewayProcess(ctx, "gw-none", sshfleet.GatewayRun{Binary: bin, Token: "t"}); !errors.Is(err, backends.ErrNotFound) {
		t.Errorf("StartGatewayProcess on an unknown instance = %v, want ErrNotFound", err)
	}
	inst, err := f.b.Create(ctx, f.spec(0, "gw-term"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.b.Terminate(context.Background(), inst.ID) })
	proc, err := f.b.StartGatewayProcess(ctx, inst.ID, sshfleet.GatewayRun{Binary: bin, Token: "t"})
	if err != nil {
		t.Fatalf("StartGatewayProcess: %v", err)
	}
	if !proc.Started || proc.IP != f.hosts[0].IP || proc.Socket != filepath.Join(f.remote, inst.ID, "gateway", "admin.sock") {
		t.Errorf("StartGatewayProcess = %+v; want started, on %s", proc, f.hosts[0].IP)
	}
	b, err := os.ReadFile(filepath.Join(f.remote, inst.ID, "gateway", "gateway.pid"))
	if err != nil {
		t.Fatal(err)
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	args, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if !strings.Contains(string(args), "\x00--http\x00\x00--https\x00\x00") {
		t.Errorf("gateway command line %q; want empty --http and --https", args)
	}
	if err := f.b.Terminate(ctx, inst.ID); err != nil {
		t.Fatal(err)
	}
	if alive(pid) {
		t.Errorf("gateway %d still runs after Terminate", pid)
	}
	if _, err := os.Stat(filepath.Join(f.remote, inst.ID)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("instance directory after Terminate: %v", err)
	}
}
