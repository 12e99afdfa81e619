package sim_test

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"hoist/e2e/cloudsim/sim"
	"hoist/e2e/testenv"
)

// toy is the smallest provider there is, to drive the core through its
// Provider hooks: POST /instances?type=T&id=I creates and boots an instance
// of type T (capacity via Take, faults via Call).
type toy struct{}

func (toy) Name() string { return "toy" }
func (toy) TLS() bool    { return true }
func (toy) Backend(s *sim.Sim, endpoint string) map[string]any {
	return map[string]any{"type": "toy", "endpoint_url": endpoint}
}
func (toy) Interrupt(s *sim.Sim, id string) error { return s.Reclaim("toy", id) }
func (toy) Handler(s *sim.Sim) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /instances", func(w http.ResponseWriter, r *http.Request) {
		if s.Call("toy", "CreateInstance") {
			http.Error(w, "throttled", http.StatusTooManyRequests)
			return
		}
		typ := r.URL.Query().Get("type")
		if !s.Take(typ) {
			http.Error(w, "no capacity", http.StatusServiceUnavailable)
			return
		}
		if _, err := s.Create(sim.Resource{Provider: "toy", Kind: sim.KindInstance, ID: r.URL.Query().Get("id"), InstanceType: typ, State: sim.StatePending}); err != nil {
			http.Error(w, err.Error(), http.StatusConflict)
			return
		}
		w.WriteHeader(http.StatusCreated)
	})
	return mux
}

// bootVM creates instance id for user with keys (and userData) and boots it.
func bootVM(t *testing.T, c *testenv.CloudSim, id, user, userData string, keys ...string) sim.Resource {
	t.Helper()
	s := c.Sim()
	if _, err := s.Create(sim.Resource{Provider: "toy", Kind: sim.KindInstance, ID: id, State: sim.StatePending,
		User: user, AuthorizedKeys: keys, UserData: userData}); err != nil {
		t.Fatal(err)
	}
	if err := s.Boot("toy", id); err != nil {
		t.Fatal(err)
	}
	r, _ := s.Get("toy", id)
	if r.Address == "" || len(r.HostKeys) != 1 {
		t.Fatalf("booting VM has no address or host key: %+v", r)
	}
	return c.WaitRunning("toy", id, 15*time.Second)
}

// run runs cmd on the VM over SSH as user with key, pinning its host key.
func run(r sim.Resource, user string, key ssh.Signer, cmd string) (string, error) {
	hk, _, _, _, err := ssh.ParseAuthorizedKey([]byte(r.HostKeys[0]))
	if err != nil {
		return "", err
	}
	cl, err := ssh.Dial("tcp", net.JoinHostPort(r.Address, "22"), &ssh.ClientConfig{
		User: user, Auth: []ssh.AuthMethod{ssh.PublicKeys(key)},
		HostKeyCallback: ssh.FixedHostKey(hk), Timeout: 5 * time.Second,
	})
	if err != nil {
		return "", err
	}
	defer cl.Close()
	sess, err := cl.NewSession()
	if err != nil {
		return "", err
	}
	defer sess.Close()
	out, err := sess.CombinedOutput(cmd)
	return string(out), err
}

func TestBootSSHAndHalt(t *testing.T) {
	c := testenv.StartCloudSim(t, toy{})
	key, pub := testenv.NewAuthorizedKey(t)
	other, _ := testenv.NewAuthorizedKey(t)
	r := bootVM(t, c, "vm-1", "root", "", pub)
	if !strings.HasPrefix(r.Address, "127.77.") {
		t.Errorf("address %s, want one in 127.77.0.0/16", r.Address)
	}
	out, err := run(r, "root", key, "echo ok")
	if err != nil || out != "ok\n" {
		t.Fatalf("ssh echo ok: %q, %v", out, err)
	}
	if out, err := run(r, "root", key, "echo $CLOUDSIM_VM"); err != nil || !strings.HasPrefix(out, c.StateDir+"/vms/toy/vm-1") {
		t.Errorf("a session's CLOUDSIM_VM: %q, %v", out, err)
	}
	if out, err := run(r, "root", key, "echo $HOME"); err != nil || out != c.StateDir+"/vms/toy/vm-1/home\n" {
		t.Errorf("a session's HOME: %q, %v; want the VM's own", out, err)
	}
	if _, err := run(r, "root", other, "echo ok"); err == nil {
		t.Fatal("a key that was not injected logs in")
	}
	if _, err := run(r, "nobody", key, "echo ok"); err == nil {
		t.Fatal("a user other than the instance's logs in")
	}

	// A process started on the VM (as the SSH-fleet takeover starts the
	// shim, under setsid) goes with it.
	if out, err := run(r, "root", key, "setsid sleep 600 </dev/null >/dev/null 2>&1 & echo $!"); err != nil {
		t.Fatalf("start a process on the VM: %v: %s", err, out)
	}
	start := time.Now()
	if err := c.Sim().Halt("toy", "vm-1"); err != nil {
		t.Fatal(err)
	}
	t.Logf("halt took %s", time.Since(start))
	h, _ := c.Sim().Get("toy", "vm-1")
	if h.State != sim.StateTerminated || h.TerminatedAt == nil {
		t.Fatalf("halted VM: %+v", h)
	}
	if conn, err := net.DialTimeout("tcp", net.JoinHostPort(r.Address, "22"), time.Second); err == nil {
		conn.Close()
		t.Fatal("halted VM still accepts connections")
	}
	if out, _ := exec.Command("sh", "-c", "grep -l 'CLOUDSIM_VM="+c.StateDir+"' /proc/[0-9]*/environ 2>/dev/null | wc -l").Output(); strings.TrimSpace(string(out)) != "0" {
		t.Errorf("%s processes of a halted VM left", out)
	}
	if err := c.Sim().Boot("toy", "vm-1"); err == nil {
		t.Error("a terminated VM boots again")
	}
}

func TestCloudConfigKeys(t *testing.T) {
	c := testenv.StartCloudSim(t, toy{})
	key, pub := testenv.NewAuthorizedKey(t)
	ud := "#cloud-config\nssh_authorized_keys:\n  - " + pub + "\n"
	r := bootVM(t, c, "vm-cc", "root", base64.StdEncoding.EncodeToString([]byte(ud)))
	if out, err := run(r, "root", key, "echo ok"); err != nil || out != "ok\n" {
		t.Fatalf("ssh with a cloud-config key: %q, %v", out, err)
	}
	if got := sim.CloudConfigKeys("#cloud-config\nusers:\n  - name: ubuntu\n    ssh_authorized_keys: [\"k1\"]\n  - name: other\n    ssh_authorized_keys: [\"k2\"]\n", "ubuntu"); len(got) != 1 || got[0] != "k1" {
		t.Errorf("users entry keys: %q", got)
	}
}

func TestRestartKeepsStateAndVMs(t *testing.T) {
	c := testenv.StartCloudSim(t, toy{})
	key, pub := testenv.NewAuthorizedKey(t)
	r := bootVM(t, c, "vm-r", "root", "", pub)
	gone := bootVM(t, c, "vm-gone", "root", "", pub)
	if err := c.Sim().Halt("toy", gone.ID); err != nil {
		t.Fatal(err)
	}
	going := bootVM(t, c, "vm-going", "root", "", pub)
	if _, err := c.Sim().Update("toy", going.ID, func(r *sim.Resource) error { r.State = sim.StateStopping; return nil }); err != nil {
		t.Fatal(err)
	}
	endpoints, admin := c.Endpoints, c.Admin
	start := time.Now()
	c.Restart()
	if c.Admin != admin || c.Endpoints["toy"] != endpoints["toy"] {
		t.Fatalf("restart moved the URLs: %v %s, was %v %s", c.Endpoints, c.Admin, endpoints, admin)
	}
	r2 := c.WaitRunning("toy", "vm-r", 15*time.Second)
	t.Logf("restart to VM running: %s", time.Since(start))
	if r2.Address != r.Address || r2.HostKeys[0] != r.HostKeys[0] {
		t.Fatalf("VM came back as %s %s, was %s %s", r2.Address, r2.HostKeys, r.Address, r.HostKeys)
	}
	if out, err := run(r2, "root", key, "echo ok"); err != nil || out != "ok\n" {
		t.Fatalf("ssh after restart: %q, %v", out, err)
	}
	for _, id := range []string{gone.ID, going.ID} {
		if g, _ := c.Sim().Get("toy", id); g.State != sim.StateTerminated || g.TerminatedAt == nil {
			t.Errorf("terminated or stopping VM after restart: %+v", g)
		}
	}
	if conn, err := net.DialTimeout("tcp", net.JoinHostPort(going.Address, "22"), time.Second); err == nil {
		conn.Close()
		t.Error("a VM that was stopping runs after restart")
	}
	if n := len(c.Instances()); n != 3 {
		t.Errorf("%d resources after restart, want 3", n)
	}
}

func TestFaults(t *testing.T) {
	c := testenv.StartCloudSim(t, toy{})
	s := c.Sim()
	c.Faults(sim.Faults{ErrorRate: 0.3, Capacity: map[string]int{"p4d.24xlarge": 2}})
	const n = 2000
	failed := 0
	for range n {
		if s.Call("toy", "Describe") {
			failed++
		}
	}
	// 0.3 * 2000 = 600, standard deviation about 20.5.
	if failed < 500 || failed > 700 {
		t.Errorf("%d of %d calls failed at error_rate 0.3", failed, n)
	}
	st := c.Stats()
	if st.Calls["toy"]["Describe"] != n || st.Failed["toy"]["Describe"] != failed {
		t.Errorf("stats %+v, want %d calls and %d failed", st, n, failed)
	}

	c.Faults(sim.Faults{Capacity: map[string]int{"p4d.24xlarge": 2}})
	var got []bool
	for range 3 {
		got = append(got, s.Take("p4d.24xlarge"))
	}
	if fmt.Sprint(got) != "[true true false]" || !s.Take("p5.48xlarge") {
		t.Errorf("capacity 2: Take gave %v; unlimited type refused", got)
	}
	if f := s.Faults(); f.Capacity["p4d.24xlarge"] != 0 {
		t.Errorf("capacity left: %+v", f)
	}

	c.Faults(sim.Faults{LatencyMS: 100})
	start := time.Now()
	if s.Call("toy", "Describe") {
		t.Error("a call failed without an error rate")
	}
	if d := time.Since(start); d < 100*time.Millisecond {
		t.Errorf("latency_ms 100: the call took %s", d)
	}
	c.Faults(sim.Faults{})

	// Bad faults are refused.
	resp, err := http.Post(c.Admin+"/_sim/faults", "application/json", strings.NewReader(`{"error_rate":2}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Errorf("error_rate 2: %s", resp.Status)
	}
}

func TestAdminAPI(t *testing.T) {
	c := testenv.StartCloudSim(t, toy{})
	if !strings.HasPrefix(c.Endpoints["toy"], "https://127.0.0.1:") {
		t.Fatalf("endpoints %v", c.Endpoints)
	}
	if b := c.Backend("toy"); b["type"] != "toy" || b["endpoint_url"] != c.Endpoints["toy"] {
		t.Errorf("backend entry %v", b)
	}
	// The provider's https endpoint, trusted through the CA file.
	ca, err := os.ReadFile(c.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		t.Fatalf("%s: no certificate", c.CAFile)
	}
	cl := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	c.Faults(sim.Faults{Capacity: map[string]int{"big": 1}})
	var codes []int
	for i, typ := range []string{"big", "big", "small"} {
		resp, err := cl.Post(fmt.Sprintf("%s/instances?type=%s&id=i-%d", c.Endpoints["toy"], typ, i), "", nil)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		codes = append(codes, resp.StatusCode)
	}
	if fmt.Sprint(codes) != "[201 503 201]" {
		t.Errorf("create big, big, small with capacity big=1: %v", codes)
	}
	if st := c.Stats(); st.Calls["toy"]["CreateInstance"] != 3 {
		t.Errorf("stats %+v", st)
	}
	res := c.Instances()
	if len(res) != 2 || res[0].ID != "i-0" || res[1].ID != "i-2" || res[0].Kind != sim.KindInstance || res[0].CreatedAt.IsZero() {
		t.Fatalf("instances %+v", res)
	}
	r := c.Interrupt("i-2")
	if !r.Interrupted || r.State != sim.StateTerminated || r.TerminatedAt == nil {
		t.Errorf("interrupted: %+v", r)
	}
	for path, want := range map[string]int{
		"/_sim/backend/nope":       http.StatusNotFound,
		"/_sim/interrupt?id=nope":  http.StatusNotFound,
		"/_sim/interrupt":          http.StatusBadRequest,
		"/_sim/faults":             http.StatusOK,
		"/_sim/instances?kind=any": http.StatusOK,
	} {
		method := http.MethodGet
		if strings.HasPrefix(path, "/_sim/interrupt") {
			method = http.MethodPost
		}
		req, _ := http.NewRequest(method, c.Admin+path, bytes.NewReader(nil))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var body any
		_ = json.NewDecoder(resp.Body).Decode(&body)
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("%s %s: %s %v, want %d", method, path, resp.Status, body, want)
		}
	}
}

func TestStuckVMStaysPending(t *testing.T) {
	c := testenv.StartCloudSim(t, toy{})
	s := c.Sim()
	c.Faults(sim.Faults{Stuck: map[string]int{"slow": 1}})
	for _, id := range []string{"stuck", "fine"} {
		if _, err := s.Create(sim.Resource{Provider: "toy", Kind: sim.KindInstance, ID: id, InstanceType: "slow", State: sim.StatePending}); err != nil {
			t.Fatal(err)
		}
		if err := s.Boot("toy", id); err != nil {
			t.Fatal(err)
		}
	}
	c.WaitRunning("toy", "fine", 15*time.Second)
	time.Sleep(300 * time.Millisecond)
	r, _ := s.Get("toy", "stuck")
	if r.State != sim.StatePending || r.Address == "" {
		t.Fatalf("stuck VM: %s at %q", r.State, r.Address)
	}
	if conn, err := net.DialTimeout("tcp", net.JoinHostPort(r.Address, "22"), time.Second); err == nil {
		conn.Close()
		t.Fatal("a stuck VM accepts connections")
	}
	if err := s.Halt("toy", "stuck"); err != nil {
		t.Fatal(err)
	}
}

// A simulator killed rather than stopped leaves its sshds running; the next
// one over the same state takes them over on the same addresses.
func TestKilledSimulatorsVMsComeBack(t *testing.T) {
	testenv.Require(t, "sshd")
	if os.Geteuid() != 0 {
		testenv.Missing(t, "VMs listen on port 22: run as root")
	}
	dir := t.TempDir()
	key, pub := testenv.NewAuthorizedKey(t)
	s1, err := sim.New(sim.Config{StateDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s1.Close() })
	if _, err := s1.Create(sim.Resource{Provider: "toy", Kind: sim.KindInstance, ID: "vm", State: sim.StatePending, User: "root", AuthorizedKeys: []string{pub}}); err != nil {
		t.Fatal(err)
	}
	if err := s1.Boot("toy", "vm"); err != nil {
		t.Fatal(err)
	}
	r1 := waitRunning(t, s1, "vm")
	s2, err := sim.New(sim.Config{StateDir: dir}) // s1 is not closed: it was "killed"
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s2.Close() })
	r2 := waitRunning(t, s2, "vm")
	if r2.Address != r1.Address || r2.HostKeys[0] != r1.HostKeys[0] {
		t.Fatalf("VM came back as %s, was %s", r2.Address, r1.Address)
	}
	if out, err := run(r2, "root", key, "echo ok"); err != nil || out != "ok\n" {
		t.Fatalf("ssh: %q, %v", out, err)
	}
}

func waitRunning(t *testing.T, s *sim.Sim, id string) sim.Resource {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		r, _ := s.Get("toy", id)
		if r.State == sim.StateRunning {
			return r
		}
		if r.Message != "" || time.Now().After(deadline) {
			t.Fatalf("%s: %s %s", id, r.State, r.Message)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// A VM whose address another process took while the simulator was down
// comes back on a new one, with its host key.
func TestRestartOnTakenAddressMoves(t *testing.T) {
	c := testenv.StartCloudSim(t, toy{})
	key, pub := testenv.NewAuthorizedKey(t)
	r := bootVM(t, c, "vm-m", "root", "", pub)
	c.Restart() // the first restart keeps it; stop it again with its address taken
	c.WaitRunning("toy", "vm-m", 15*time.Second)
	if err := c.Sim().Close(); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(r.Address, "22"))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	c.Restart()
	r2 := c.WaitRunning("toy", "vm-m", 15*time.Second)
	if r2.Address == r.Address || r2.HostKeys[0] != r.HostKeys[0] {
		t.Fatalf("VM came back on %s with %s, was %s with %s", r2.Address, r2.HostKeys, r.Address, r.HostKeys)
	}
	if out, err := run(r2, "root", key, "echo ok"); err != nil || out != "ok\n" {
		t.Fatalf("ssh: %q, %v", out, err)
	}
}
