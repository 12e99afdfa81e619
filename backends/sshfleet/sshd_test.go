package sshfleet_test

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"hoist/e2e/testenv"
)

const sshdPath = "/usr/sbin/sshd"

// sshd is a real OpenSSH server on a loopback address, started by the test
// with its own generated host key and the test's client key authorized.
type sshd struct {
	t       *testing.T
	ip      string
	port    int
	dir     string
	HostKey ssh.Signer

	mu     sync.Mutex
	cmd    *exec.Cmd
	done   chan struct{}
	stderr *syncBuffer
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func newKey(t *testing.T) (ssh.Signer, []byte) {
	t.Helper()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	s, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	blk, err := ssh.MarshalPrivateKey(priv, "")
	if err != nil {
		t.Fatal(err)
	}
	return s, pem.EncodeToMemory(blk)
}

// startSSHD starts sshd on ip (a loopback address) and a free port,
// authorizing client. It is stopped (with every connection) in t.Cleanup.
func startSSHD(t *testing.T, ip string, client ssh.PublicKey) *sshd {
	t.Helper()
	if _, err := os.Stat(sshdPath); err != nil {
		if testenv.InCI() {
			t.Fatalf("openssh-server not installed: %v", err)
		}
		t.Skipf("SKIP: openssh-server not installed: %v", err)
	}
	if os.Geteuid() == 0 {
		if err := os.MkdirAll("/run/sshd", 0o755); err != nil {
			t.Fatal(err)
		}
	}
	s := &sshd{t: t, ip: ip, dir: t.TempDir()}
	if err := os.WriteFile(filepath.Join(s.dir, "authorized_keys"), ssh.MarshalAuthorizedKey(client), 0o600); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		t.Fatal(err)
	}
	s.port = ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	s.start(t, nil)
	t.Cleanup(s.Kill)
	return s
}

// Addr returns ip:port.
func (s *sshd) Addr() string { return net.JoinHostPort(s.ip, strconv.Itoa(s.port)) }

// start (re)starts sshd with a new host key when key is nil.
func (s *sshd) start(t *testing.T, key []byte) {
	t.Helper()
	if key == nil {
		s.HostKey, key = newKey(t)
	}
	hk := filepath.Join(s.dir, "host_ed25519")
	if err := os.WriteFile(hk, key, 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(s.dir, "sshd_config")
	conf := fmt.Sprintf(`Port %d
ListenAddress %s
HostKey %s
AuthorizedKeysFile %s
PidFile %s
UsePAM no
PasswordAuthentication no
KbdInteractiveAuthentication no
PermitRootLogin prohibit-password
StrictModes no
AllowTcpForwarding yes
ClientAliveInterval 0
LogLevel INFO
`, s.port, s.ip, hk, filepath.Join(s.dir, "authorized_keys"), filepath.Join(s.dir, "sshd.pid"))
	if err := os.WriteFile(cfg, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(sshdPath, "-t", "-f", cfg).CombinedOutput(); err != nil {
		t.Fatalf("sshd -t: %v: %s", err, out)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stderr = &syncBuffer{}
	s.cmd = exec.Command(sshdPath, "-D", "-e", "-f", cfg)
	s.cmd.Stderr = s.stderr
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s.done = make(chan struct{})
	cmd, done := s.cmd, s.done
	go func() { _ = cmd.Wait(); close(done) }()
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", s.Addr(), time.Second)
		if err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("sshd on %s did not come up: %v\n%s", s.Addr(), err, s.stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	buf := s.stderr
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("sshd %s stderr:\n%s", s.Addr(), buf.String())
		}
	})
}

// Kill stops sshd and every per-connection sshd process it forked, so that
// established connections drop too (a host going away).
func (s *sshd) Kill() {
	s.mu.Lock()
	cmd, done := s.cmd, s.done
	s.mu.Unlock()
	if cmd == nil || cmd.Process == nil {
		return
	}
	select {
	case <-done:
		return
	default:
	}
	children := childrenOf(cmd.Process.Pid)
	_ = cmd.Process.Kill()
	for _, pid := range children {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	<-done
}

// Restart kills sshd and starts it again on the same address with a fresh
// host key (a reinstalled host, or a man in the middle).
func (s *sshd) RestartWithNewKey(t *testing.T) {
	s.Kill()
	s.start(t, nil)
}

// Restart kills sshd and starts it again with the same host key.
func (s *sshd) Restart(t *testing.T) {
	s.Kill()
	b, err := os.ReadFile(filepath.Join(s.dir, "host_ed25519"))
	if err != nil {
		t.Fatal(err)
	}
	s.start(t, b)
}

// childrenOf lists the sshd processes descending from pid: the per-connection
// and privilege-separated processes of the listener.
func childrenOf(pid int) []int {
	ents, _ := os.ReadDir("/proc")
	parent := map[int]int{}
	for _, e := range ents {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(s[i+1:])
		if len(f) < 2 {
			continue
		}
		pp, _ := strconv.Atoi(f[1])
		parent[p] = pp
	}
	var out []int
	var walk func(int)
	walk = func(p int) {
		for c, pp := range parent {
			if name := comm(c); pp == p && (name == "sshd" || name == "sshd-session") {
				out = append(out, c)
				walk(c)
			}
		}
	}
	walk(pid)
	return out
}

func comm(pid int) string {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
	return strings.TrimSpace(string(b))
}
