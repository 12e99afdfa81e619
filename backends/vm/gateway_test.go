package vm_test

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"hoist/agents/api"
	"hoist/backends"
	"hoist/backends/aws"
	"hoist/backends/internal/agentbin"
	"hoist/backends/internal/drivertest"
	"hoist/e2e/testenv"
)

// TestGatewayHost_runsTheGatewayOnAVM runs `hoist gateway` on a simulated
// VM through backends.GatewayHost and checks what the gateway's contract
// asks: the binary uploaded next to the agents (once), the command line, the
// token in a 0600 file, the public listener on the VM's own address, the
// admin API's health check reached through Connect's HTTP client at the
// admin socket, a second start with the same token leaving it alone, a new
// token or another hoist binary restarting it, and StopGateway stopping it
// by its pid file. Set
// HOIST_GATEWAY_BINARY to a static hoist build to run it against the real
// gateway.
func TestGatewayHost_runsTheGatewayOnAVM(t *testing.T) {
	testenv.Docker(t)
	bin := drivertest.GatewayBinary(t, runtime.GOARCH)
	e := newEnv(t, func(d *backends.Deps) { d.GatewayBinary = bin })
	ctx := t.Context()
	s := spec("gw-1")
	s.Gateway = true
	inst := e.waitRunning(t, s)
	t.Cleanup(func() { e.terminate(t, s.ID) })
	gh, ok := e.b.(backends.GatewayHost)
	if !ok {
		t.Fatalf("%T is not a backends.GatewayHost", e.b)
	}
	vmIP, _, err := net.SplitHostPort(inst.Hostname)
	if err != nil {
		vmIP = inst.Hostname
	}
	// InstanceSpec.Gateway reached the driver: the VM's security groups
	// let HTTP and HTTPS in.
	for _, rule := range []string{"tcp:80:80:0.0.0.0/0", "tcp:443:443:0.0.0.0/0"} {
		if got := e.ingress(t, inst); !slices.Contains(got, rule) {
			t.Errorf("gateway VM ingress %q lacks %s", got, rule)
		}
	}

	began := time.Now()
	ep, err := gh.StartGateway(ctx, inst, backends.GatewayProcess{Token: "token-one"})
	if err != nil {
		t.Fatalf("StartGateway: %v", err)
	}
	t.Logf("first start (upload, supervisor, health check): %s", time.Since(began).Round(time.Millisecond))
	sock, ok := api.SocketPath(ep.AdminURL)
	if !ok || filepath.Base(sock) != "admin.sock" || ep.PublicAddr != vmIP || ep.HTTPPort != 80 || ep.HTTPSPort != 443 {
		t.Fatalf("StartGateway = %+v; want a unix:// admin socket, public address %s, ports 80 and 443", ep, vmIP)
	}
	gdir := filepath.Dir(sock)
	idir := filepath.Dir(gdir)
	if fi, err := os.Stat(sock); err != nil || fi.Mode().Type() != os.ModeSocket {
		t.Fatalf("admin socket %s: %v", sock, err)
	}
	if fi, err := os.Stat(filepath.Join(gdir, "token")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("token file: %v, %v; want mode 0600", fi, err)
	} else if b, _ := os.ReadFile(filepath.Join(gdir, "token")); strings.TrimSpace(string(b)) != "token-one" {
		t.Errorf("token file holds %q", b)
	}
	for _, agent := range []string{"hoist-shim", "hoist-runner", "hoist"} {
		if _, err := os.Stat(filepath.Join(idir, "bin", agent)); err != nil {
			t.Errorf("bin/%s next to the agents: %v", agent, err)
		}
	}
	pid := gatewayPID(t, gdir)
	want := []string{filepath.Join(idir, "bin", "hoist"), "gateway", "--state-dir", filepath.Join(gdir, "state"), "--admin-socket", sock,
		"--token-file", filepath.Join(gdir, "token"), "--http", vmIP + ":80", "--https", vmIP + ":443"}
	if got := cmdline(t, pid); !slices.Equal(got, want) {
		t.Errorf("gateway command line\n got %q\nwant %q", got, want)
	}
	if nc, err := net.DialTimeout("tcp", net.JoinHostPort(vmIP, "80"), 5*time.Second); err != nil {
		t.Errorf("the gateway's HTTP listener on the VM's address: %v", err)
	} else {
		nc.Close()
	}
	conn, err := e.b.(backends.Connector).Connect(ctx, inst)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	if h, err := api.NewGatewayClient(ep.AdminURL, conn.HTTPClient(), "token-one").Health(ctx); err != nil || h.Service != api.GatewayService {
		t.Errorf("gateway health through the instance's connection = %+v, %v", h, err)
	}
	if _, err := api.NewGatewayClient(ep.AdminURL, conn.HTTPClient(), "wrong").Health(ctx); !errors.Is(err, api.ErrUnauthorized) {
		t.Errorf("gateway health with a wrong token = %v, want unauthorized", err)
	}

	// The same token again (the reconciler's next pass): left alone, not
	// uploaded again.
	binInfo, _ := os.Stat(filepath.Join(idir, "bin", "hoist"))
	began = time.Now()
	if ep2, err := gh.StartGateway(ctx, inst, backends.GatewayProcess{Token: "token-one"}); err != nil || ep2 != ep {
		t.Fatalf("StartGateway again = %+v, %v; want %+v", ep2, err, ep)
	}
	t.Logf("start of a running gateway (one probe): %s", time.Since(began).Round(time.Millisecond))
	if got := gatewayPID(t, gdir); got != pid {
		t.Errorf("gateway pid after a second start with the same token = %d, want %d (left running)", got, pid)
	}
	if fi, _ := os.Stat(filepath.Join(idir, "bin", "hoist")); !fi.ModTime().Equal(binInfo.ModTime()) {
		t.Errorf("bin/hoist was uploaded again")
	}

	// Another token restarts it with that token.
	began = time.Now()
	if _, err := gh.StartGateway(ctx, inst, backends.GatewayProcess{Token: "token-two"}); err != nil {
		t.Fatalf("StartGateway with a new token: %v", err)
	}
	t.Logf("restart with a new token: %s", time.Since(began).Round(time.Millisecond))
	if got := gatewayPID(t, gdir); got == pid || alive(pid) {
		t.Errorf("gateway pid after a new token = %d (was %d, alive %v); want a new process", got, pid, alive(pid))
	}
	pid = gatewayPID(t, gdir)
	if _, err := api.NewGatewayClient(ep.AdminURL, conn.HTTPClient(), "token-two").Health(ctx); err != nil {
		t.Errorf("gateway health with the new token: %v", err)
	}

	// Another server, whose hoist differs (an upgrade): uploaded and
	// restarted with it.
	newer := filepath.Join(t.TempDir(), "hoist")
	b, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(newer, append(b, "\nnewer build\n"...), 0o755); err != nil {
		t.Fatal(err)
	}
	upgraded, err := aws.Factory(drivertest.Config(t, "aws", e.cs.Backend("aws"), nil), backends.Deps{Records: e.recs, Agents: agentbin.Agents, GatewayBinary: newer})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { upgraded.(interface{ Close() error }).Close() })
	if _, err := upgraded.(backends.GatewayHost).StartGateway(ctx, inst, backends.GatewayProcess{Token: "token-two"}); err != nil {
		t.Fatalf("StartGateway with another hoist binary: %v", err)
	}
	if fi, err := os.Stat(filepath.Join(idir, "bin", "hoist")); err != nil || fi.Size() != int64(len(b))+int64(len("\nnewer build\n")) {
		t.Errorf("bin/hoist after an upgrade: %v, %v; want the newer binary", fi, err)
	}
	if got := gatewayPID(t, gdir); got == pid || alive(pid) {
		t.Errorf("gateway pid after an upgrade = %d (was %d, alive %v); want a new process", got, pid, alive(pid))
	}
	pid = gatewayPID(t, gdir)

	if err := gh.StopGateway(ctx, inst); err != nil {
		t.Fatalf("StopGateway: %v", err)
	}
	if alive(pid) {
		t.Errorf("gateway %d still runs after StopGateway", pid)
	}
	for _, f := range []string{"gateway.pid", "supervisor.pid", "admin.sock", "token"} {
		if _, err := os.Stat(filepath.Join(gdir, f)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s after StopGateway: %v; want it gone", f, err)
		}
	}
	if err := gh.StopGateway(ctx, inst); err != nil {
		t.Errorf("StopGateway of a stopped gateway: %v", err)
	}
}

// TestGatewayHost_refusesAnotherArchitecture checks that a server whose
// hoist binary is of another architecture than the VM refuses to start the
// gateway there (stalled, naming both), and that a server without a binary
// says so.
func TestGatewayHost_refusesAnotherArchitecture(t *testing.T) {
	testenv.Docker(t)
	other := map[string]string{"amd64": "arm64", "arm64": "amd64"}[runtime.GOARCH]
	if other == "" {
		t.Skipf("hosts run amd64 or arm64, not %s", runtime.GOARCH)
	}
	bin := drivertest.GatewayBinary(t, other)
	e := newEnv(t, func(d *backends.Deps) { d.GatewayBinary = bin })
	s := spec("gw-arch")
	s.Gateway = true
	inst := e.waitRunning(t, s)
	t.Cleanup(func() { e.terminate(t, s.ID) })
	_, err := e.b.(backends.GatewayHost).StartGateway(t.Context(), inst, backends.GatewayProcess{Token: "t"})
	if !backends.IsStalled(err) || !errors.Is(err, backends.ErrUnsupportedHost) || !strings.Contains(err.Error(), other) || !strings.Contains(err.Error(), runtime.GOARCH) {
		t.Errorf("StartGateway with a %s binary on a %s VM = %v; want a stalled ErrUnsupportedHost naming both", other, runtime.GOARCH, err)
	}

	// Another server over the same records, without a hoist binary.
	b2, err := aws.Factory(drivertest.Config(t, "aws", e.cs.Backend("aws"), nil), backends.Deps{Records: e.recs, Agents: agentbin.Agents})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b2.(interface{ Close() error }).Close() })
	if _, err := b2.(backends.GatewayHost).StartGateway(t.Context(), inst, backends.GatewayProcess{Token: "t"}); !backends.IsStalled(err) {
		t.Errorf("StartGateway without a hoist binary = %v; want stalled", err)
	}
}

// TestHostAccess_dialsAVM checks backends.HostAccess on a simulated VM: the
// login it returns (the instance's own key, the VM's pinned host key) dials
// the VM strictly and runs a command there.
func TestHostAccess_dialsAVM(t *testing.T) {
	testenv.Docker(t)
	e := newEnv(t)
	s := spec("access-1")
	inst := e.waitRunning(t, s)
	t.Cleanup(func() { e.terminate(t, s.ID) })
	h, err := e.b.(backends.HostAccess).SSHAccess(t.Context(), inst)
	if err != nil {
		t.Fatal(err)
	}
	vmIP, _, _ := net.SplitHostPort(inst.Hostname)
	if vmIP == "" {
		vmIP = inst.Hostname
	}
	if h.Hostname != vmIP || len(h.HostKeys) == 0 || h.ProxyJump != nil {
		t.Errorf("access = %s@%s:%d host keys %q; want the VM %s, pinned", h.User, h.Hostname, h.Port, h.HostKeys, vmIP)
	}
	if got := e.ingress(t, inst); slices.Contains(got, "tcp:80:80:0.0.0.0/0") {
		t.Errorf("non-gateway VM ingress %q opens HTTP", got)
	}
	c := drivertest.DialAccess(t, h)
	out, err := c.Run(t.Context(), `echo "$SSH_CONNECTION"`, nil)
	if err != nil {
		t.Fatal(err)
	}
	if f := strings.Fields(string(out)); len(f) != 4 || f[2] != vmIP {
		t.Errorf("SSH_CONNECTION on the VM = %q; want a connection to %s", out, vmIP)
	}
	if _, err := e.b.(backends.HostAccess).SSHAccess(t.Context(), backends.Instance{ID: "no-such-instance"}); !errors.Is(err, backends.ErrNotFound) {
		t.Errorf("SSHAccess of an unknown instance = %v, want ErrNotFound", err)
	}
}

// gatewayPID waits (bounded) for the gateway's pid file in dir.
func gatewayPID(t *testing.T, dir string) int {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		b, err := os.ReadFile(filepath.Join(dir, "gateway.pid"))
		if pid, perr := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && perr == nil && alive(pid) {
			return pid
		}
		if time.Now().After(deadline) {
			t.Fatalf("no running gateway in %s/gateway.pid: %v", dir, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// cmdline returns the argv of process pid.
func cmdline(t *testing.T, pid int) []string {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSuffix(string(b), "\x00"), "\x00")
}

// alive reports whether process pid exists and is not a zombie.
func alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return syscall.Kill(pid, 0) == nil && i >= 0 && len(s) > i+2 && s[i+2] != 'Z'
}

// ingress returns the ingress rules of the security groups of inst's VM in
// the simulator ("proto:from:to:source").
func (e *env) ingress(t *testing.T, inst backends.Instance) []string {
	t.Helper()
	_, simID, _ := strings.Cut(inst.ProviderID, "/")
	r, ok := e.cs.Sim().Get("aws", simID)
	if !ok {
		t.Fatalf("no simulator VM %s", simID)
	}
	var out []string
	for _, sg := range strings.Split(r.Extra["security_groups"], ",") {
		if g, ok := e.cs.Sim().Get("aws", sg); ok && g.Extra["ingress"] != "" {
			out = append(out, strings.Split(g.Extra["ingress"], "\n")...)
		}
	}
	return out
}
