package e2e

import (
	"bufio"
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"
	"golang.org/x/crypto/ssh"

	"hoist/e2e/testenv"
	"hoist/web/client"
)

// webTask serves index.html (saying hello-from-<name>) on port 8000 with
// busybox httpd; its port reaches the instance's loopback at any free
// port (*:8000), so attach forwards 8000 or the next free local port.
func webTask(name string) string {
	return fmt.Sprintf(`type: task
name: %[1]s
image: %[2]s
ports: ["*:8000"]
commands:
  - mkdir -p /tmp/www && echo hello-from-%[1]s > /tmp/www/index.html
  - exec httpd -f -p 8000 -h /tmp/www
`, name, testenv.BusyboxImage)
}

// webDevEnv is a dev environment (no ide) whose init starts busybox httpd
// in the background on port 8000, serving hello-from-<name>; the
// environment then stays up.
func webDevEnv(name string) string {
	return fmt.Sprintf(`type: dev-environment
name: %[1]s
image: %[2]s
ports: ["*:8000"]
init:
  - mkdir -p /tmp/www && echo hello-from-%[1]s > /tmp/www/index.html
  - httpd -p 8000 -h /tmp/www
`, name, testenv.BusyboxImage)
}

// cliUser is a user's machine: a home of its own (its ~/.ssh/config and
// ~/.config/hoist), with the server's URL and token in the environment.
type cliUser struct {
	t    *testing.T
	s    *server
	home string
}

func newCLIUser(t *testing.T, s *server) *cliUser {
	return &cliUser{t: t, s: s, home: t.TempDir()}
}

func (u *cliUser) env() []string {
	return append(os.Environ(), "HOME="+u.home, "XDG_CONFIG_HOME="+filepath.Join(u.home, ".config"),
		"HOIST_URL="+u.s.url, "HOIST_TOKEN="+u.s.token)
}

// hoist runs the hoist CLI to its end and returns its stdout, stderr and
// exit code.
func (u *cliUser) hoist(args ...string) (string, string, int) {
	u.t.Helper()
	return u.hoistIn("", args...)
}

// hoistIn is hoist with stdin.
func (u *cliUser) hoistIn(stdin string, args ...string) (string, string, int) {
	u.t.Helper()
	cmd := exec.Command(filepath.Join(bin, "hoist"), args...)
	cmd.Env = u.env()
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		u.t.Fatalf("hoist %s: %v", strings.Join(args, " "), err)
	}
	return out.String(), errb.String(), cmd.ProcessState.ExitCode()
}

// attached is one `hoist attach -o json` process and the mapping it printed.
type attached struct {
	cmd   *exec.Cmd
	ready time.Duration // from start to the mapping printed
	start time.Time
	out   struct {
		Run   string `json:"run"`
		Ports []struct {
			ContainerPort int `json:"container_port"`
			LocalPort     int `json:"local_port"`
		} `json:"ports"`
		SSHHost   string `json:"ssh_host"`
		SSHConfig string `json:"ssh_config"`
		IDEURL    string `json:"ide_url"`
	}
	stderr bytes.Buffer
	done   chan error
}

// attach starts `hoist attach RUN -o json` and waits for its mapping.
func (u *cliUser) attach(run string) *attached {
	u.t.Helper()
	a := &attached{done: make(chan error, 1)}
	a.cmd = exec.Command(filepath.Join(bin, "hoist"), "attach", run, "-o", "json")
	a.cmd.Env = u.env()
	a.cmd.Stderr = &a.stderr
	stdout, err := a.cmd.StdoutPipe()
	if err != nil {
		u.t.Fatal(err)
	}
	a.start = time.Now()
	if err := a.cmd.Start(); err != nil {
		u.t.Fatal(err)
	}
	u.t.Cleanup(func() { a.stop() })
	line := make(chan []byte, 1)
	go func() {
		b, _ := bufio.NewReader(stdout).ReadBytes('\n')
		line <- b
		_, _ = io.Copy(io.Discard, stdout)
		a.done <- a.cmd.Wait()
	}()
	select {
	case b := <-line:
		a.ready = time.Since(a.start)
		if err := json.Unmarshal(b, &a.out); err != nil {
			u.t.Fatalf("hoist attach printed %q (%v); stderr:\n%s", b, err, a.stderr.String())
		}
	case <-time.After(60 * time.Second):
		u.t.Fatalf("hoist attach printed no mapping in 60 s; stderr:\n%s", a.stderr.String())
	}
	return a
}

// stop interrupts attach (as Ctrl-C does) and returns its exit error.
func (a *attached) stop() error {
	if a.cmd.ProcessState != nil {
		return nil
	}
	_ = a.cmd.Process.Signal(os.Interrupt)
	select {
	case err := <-a.done:
		return err
	case <-time.After(10 * time.Second):
		_ = a.cmd.Process.Kill()
		return errors.New("hoist attach did not stop on SIGINT")
	}
}

func newSigner(t *testing.T) ssh.Signer {
	t.Helper()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	s, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func authorizedKey(s ssh.Signer) string {
	return strings.TrimSpace(string(ssh.MarshalAuthorizedKey(s.PublicKey())))
}

// get fetches url and returns its body.
func get(url string) (string, error) {
	resp, err := http.Get(url)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("GET %s: %d", url, resp.StatusCode)
	}
	return string(b), err
}

// containerHostname is the hostname of the one container of s's
// installation that runs run's job.
func containerHostname(t *testing.T, s *server, run string) string {
	t.Helper()
	return runContainer(t, s, run, "{{.Config.Hostname}}")
}

// runContainer formats (docker inspect -f) the one container of s's
// installation that runs run's job.
func runContainer(t *testing.T, s *server, run, format string) string {
	t.Helper()
	out, err := exec.Command("docker", "ps", "-q", "--filter", "label=hoist.installation="+s.install).Output()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, id := range strings.Fields(string(out)) {
		b, err := exec.Command("docker", "inspect", "-f", "{{.Name}}|"+format, id).Output()
		if name, v, ok := strings.Cut(strings.TrimSpace(string(b)), "|"); err == nil && ok && strings.Contains(name, run) {
			names = append(names, v)
		}
	}
	if len(names) != 1 {
		t.Fatalf("containers of run %s: %v, want one", run, names)
	}
	return names[0]
}

// TestAttach_sshAndPortsReachTheRunningJob: a dev environment starts (a
// real `hoist serve`, the runner's SSH server in a busybox container); the
// server config's
// ssh.authorized_keys reach the job (that key is accepted, another is
// not), `hoist ssh RUN --
// CMD` runs the command in the job (its output and exit status come back),
// `hoist attach` forwards the run's port to localhost (busybox httpd
// answers through it) and writes a ~/.ssh/config entry with which OpenSSH's
// `ssh RUN` reaches the job, and Ctrl-C detaches cleanly.
func TestAttach_sshAndPortsReachTheRunningJob(t *testing.T) {
	r := newRepo(t)
	r.write("web.dstack.yml", webDevEnv("web"))
	sha := r.commit("add web")
	project := newSigner(t)
	cfg := filepath.Join(t.TempDir(), "hoist.yml")
	if err := os.WriteFile(cfg, []byte("backends:\n  - type: local\nssh:\n  authorized_keys:\n    - "+authorizedKey(project)+" ci@example\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s := startServer(t, r.dir, "--config", cfg)
	s.waitRun("web", sha, "running", 90*time.Second)
	u := newCLIUser(t, s)

	// The config's project key is accepted on every connection; a key
	// that is neither it nor the connection's user key is not.
	c := &client.Client{BaseURL: s.url, Token: s.token}
	for _, tc := range []struct {
		name   string
		signer ssh.Signer
		ok     bool
	}{{"project key", project, true}, {"unknown key", newSigner(t), false}} {
		conn, hostKey, err := c.DialSSH(t.Context(), "web", "", authorizedKey(newSigner(t)))
		if err != nil {
			t.Fatalf("%s: DialSSH: %v", tc.name, err)
		}
		hk, _, _, _, err := ssh.ParseAuthorizedKey([]byte(hostKey))
		if err != nil {
			t.Fatalf("host key %q: %v", hostKey, err)
		}
		sc, chans, reqs, err := ssh.NewClientConn(conn, "web", &ssh.ClientConfig{User: "root",
			Auth: []ssh.AuthMethod{ssh.PublicKeys(tc.signer)}, HostKeyCallback: ssh.FixedHostKey(hk), HostKeyAlgorithms: []string{hk.Type()}})
		if (err == nil) != tc.ok {
			t.Fatalf("%s: handshake error %v, want accepted %v", tc.name, err, tc.ok)
		}
		if err != nil {
			conn.Close()
			continue
		}
		sshc := ssh.NewClient(sc, chans, reqs)
		sess, err := sshc.NewSession()
		if err != nil {
			t.Fatal(err)
		}
		if out, err := sess.Output("echo project key ok"); err != nil || string(out) != "project key ok\n" {
			t.Errorf("%s: exec: %q, %v", tc.name, out, err)
		}
		sshc.Close()
	}

	out, errs, code := u.hoist("ssh", "web", "--", "cat", "/etc/hostname")
	if want := containerHostname(t, s, "web"); code != 0 || strings.TrimSpace(out) != want {
		t.Fatalf("hoist ssh web -- cat /etc/hostname: exit %d, %q (stderr %q), want the container's hostname %q", code, out, errs, want)
	}
	if _, _, code := u.hoist("ssh", "web", "--", "exit 7"); code != 7 {
		t.Errorf("hoist ssh web -- 'exit 7' exited %d, want the command's 7", code)
	}
	// A shell without a terminal reads its commands from stdin.
	if out, errs, code := u.hoistIn("echo piped $((6*7))\nexit 4\n", "ssh", "web"); code != 4 || out != "piped 42\n" {
		t.Errorf("hoist ssh web with commands on stdin: exit %d, %q (stderr %q); want 4, \"piped 42\"", code, out, errs)
	}
	// A shell on a terminal gets a terminal of the same size in the job.
	ptmx, tty, err := pty.Open()
	if err != nil {
		t.Fatal(err)
	}
	defer ptmx.Close()
	if err := pty.Setsize(ptmx, &pty.Winsize{Rows: 41, Cols: 123}); err != nil {
		t.Fatal(err)
	}
	sh := exec.Command(filepath.Join(bin, "hoist"), "ssh", "web")
	sh.Env = u.env()
	sh.Stdin, sh.Stdout, sh.Stderr = tty, tty, tty
	sh.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true}
	if err := sh.Start(); err != nil {
		t.Fatal(err)
	}
	tty.Close()
	var screen bytes.Buffer
	read := make(chan struct{})
	go func() { _, _ = io.Copy(&screen, ptmx); close(read) }()
	_, _ = ptmx.Write([]byte("stty size; tty; exit 5\n"))
	waited := make(chan error, 1)
	go func() { waited <- sh.Wait() }()
	select {
	case <-waited:
	case <-time.After(30 * time.Second):
		_ = sh.Process.Kill()
		t.Fatalf("hoist ssh with a terminal did not end; screen:\n%s", screen.String())
	}
	<-read
	if code := sh.ProcessState.ExitCode(); code != 5 || !strings.Contains(screen.String(), "41 123") || !strings.Contains(screen.String(), "/dev/pts/") {
		t.Errorf("hoist ssh on a terminal: exit %d, screen:\n%s\nwant exit 5, a 41x123 pts", code, screen.String())
	}

	if _, errs, code := u.hoist("ssh", "nope", "--", "true"); code != 3 {
		t.Errorf("hoist ssh of an unknown run exited %d (%s), want 3", code, errs)
	}

	a := u.attach("web")
	if len(a.out.Ports) != 1 || a.out.Ports[0].ContainerPort != 8000 || a.out.Ports[0].LocalPort < 8000 {
		t.Fatalf("attach mapping %+v, want 8000 at 8000 or the next free port", a.out)
	}
	url := fmt.Sprintf("http://127.0.0.1:%d/", a.out.Ports[0].LocalPort)
	if body, err := get(url); err != nil || strings.TrimSpace(body) != "hello-from-web" {
		t.Fatalf("GET %s through attach: %q, %v", url, body, err)
	}
	sshCfg, err := os.ReadFile(a.out.SSHConfig)
	if err != nil || a.out.SSHConfig != filepath.Join(u.home, ".ssh", "config") || !strings.Contains(string(sshCfg), "Host web\n") {
		t.Fatalf("ssh config %s: %v\n%s", a.out.SSHConfig, err, sshCfg)
	}
	if _, err := exec.LookPath("ssh"); err != nil && os.Getenv("CI") != "true" {
		t.Log("no OpenSSH client here: skipping `ssh web`")
	} else {
		cmd := exec.Command("ssh", "-F", a.out.SSHConfig, "-o", "BatchMode=yes", "web", "cat /etc/hostname")
		cmd.Env = u.env()
		b, err := cmd.CombinedOutput()
		if want := containerHostname(t, s, "web"); err != nil || !slices.Contains(strings.Fields(string(b)), want) {
			t.Fatalf("ssh web (OpenSSH with the written config): %v\n%s", err, b)
		}
		kh, _ := os.ReadFile(filepath.Join(u.home, ".config", "hoist", "ssh", "known_hosts"))
		if !strings.HasPrefix(string(kh), "web ssh-") {
			t.Errorf("known_hosts %q, want the job's key for web", kh)
		}
	}
	if err := a.stop(); err != nil {
		t.Fatalf("hoist attach on SIGINT: %v; stderr:\n%s", err, a.stderr.String())
	}
	if _, err := get(url); err == nil {
		t.Errorf("%s still answers after detaching", url)
	}
}

// TestMeasure_attach measures `hoist ssh RUN -- true` and `hoist attach`
// to the first byte through a forwarded port (the process's start to the first byte of a GET through
// the port it forwards) and each request's latency through it, next to a
// GET of the same page at the port the local backend published on this
// host's loopback. Set HOIST_MEASURE=1 to run it.
func TestMeasure_attach(t *testing.T) {
	if os.Getenv("HOIST_MEASURE") == "" {
		t.Skip("measurement: set HOIST_MEASURE=1")
	}
	r := newRepo(t)
	r.write("web.dstack.yml", webTask("web"))
	sha := r.commit("add web")
	s := startServer(t, r.dir)
	s.waitRun("web", sha, "running", 90*time.Second)
	u := newCLIUser(t, s)
	// The user's key is generated on the first use; measure warm.
	if _, errs, code := u.hoist("ssh", "web", "--", "true"); code != 0 {
		t.Fatalf("hoist ssh: %d %s", code, errs)
	}
	var execs []time.Duration
	for i := 0; i < 10; i++ {
		t0 := time.Now()
		if _, errs, code := u.hoist("ssh", "web", "--", "true"); code != 0 {
			t.Fatalf("hoist ssh: %d %s", code, errs)
		}
		execs = append(execs, time.Since(t0))
	}
	const rounds, requests = 5, 200
	var firsts []time.Duration
	var lat []time.Duration
	for i := 0; i < rounds; i++ {
		a := u.attach("web")
		url := fmt.Sprintf("http://127.0.0.1:%d/", a.out.Ports[0].LocalPort)
		if _, err := get(url); err != nil {
			t.Fatal(err)
		}
		firsts = append(firsts, time.Since(a.start))
		if i == 0 {
			for j := 0; j < requests; j++ {
				t0 := time.Now()
				if _, err := get(url); err != nil {
					t.Fatal(err)
				}
				lat = append(lat, time.Since(t0))
			}
		}
		if err := a.stop(); err != nil {
			t.Fatal(err)
		}
	}
	// The same page at the port the local backend published on this
	// host's loopback, without SSH.
	pb, err := exec.Command("docker", "port", runContainer(t, s, "web", "{{.Id}}"), "8000/tcp").Output()
	if err != nil {
		t.Fatalf("docker port: %v", err)
	}
	published := string(pb)
	var direct []time.Duration
	for _, hp := range strings.Fields(published) {
		for j := 0; j < requests; j++ {
			t0 := time.Now()
			if _, err := get("http://" + hp + "/"); err != nil {
				t.Fatal(err)
			}
			direct = append(direct, time.Since(t0))
		}
		break
	}
	slices.Sort(execs)
	slices.Sort(firsts)
	slices.Sort(lat)
	slices.Sort(direct)
	pct := func(d []time.Duration, p float64) time.Duration { return d[int(float64(len(d)-1)*p)] }
	fmt.Printf("hoist ssh RUN -- true (process start to exit): median %s, min %s, max %s (10 runs)\n",
		pct(execs, 0.5).Round(time.Millisecond), execs[0].Round(time.Millisecond), execs[len(execs)-1].Round(time.Millisecond))
	fmt.Printf("attach → first byte through a forwarded port: median %s, min %s, max %s (%d attaches)\n",
		pct(firsts, 0.5).Round(time.Millisecond), firsts[0].Round(time.Millisecond), firsts[len(firsts)-1].Round(time.Millisecond), rounds)
	fmt.Printf("GET through the forwarded port (new TCP connection each): p50 %s, p90 %s, p99 %s (%d requests)\n",
		pct(lat, 0.5).Round(10*time.Microsecond), pct(lat, 0.9).Round(10*time.Microsecond), pct(lat, 0.99).Round(10*time.Microsecond), requests)
	if len(direct) > 0 {
		fmt.Printf("GET at the published port, no SSH (%s): p50 %s, p90 %s, p99 %s (%d requests)\n", strings.Fields(published)[0],
			pct(direct, 0.5).Round(10*time.Microsecond), pct(direct, 0.9).Round(10*time.Microsecond), pct(direct, 0.99).Round(10*time.Microsecond), requests)
	}
}
