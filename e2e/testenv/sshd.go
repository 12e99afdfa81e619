package testenv

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"net"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"

	"hoist/e2e/internal/sshd"
)

// SSHDPath is where Debian's openssh-server installs sshd.
const SSHDPath = sshd.Path

// SSHKey is a generated ed25519 key pair; Path holds the private key in
// OpenSSH PEM form (mode 0600), usable as an identity_file.
type SSHKey struct {
	// Signer signs with the private key.
	Signer ssh.Signer
	// PEM is the private key in OpenSSH PEM form.
	PEM []byte
	// Path is the file holding PEM.
	Path string
}

// NewSSHKey generates an ed25519 key and writes it to dir/name.
func NewSSHKey(t testing.TB, dir, name string) SSHKey {
	t.Helper()
	s, p := newEd25519(t)
	k := SSHKey{Signer: s, PEM: p, Path: filepath.Join(dir, name)}
	if err := os.WriteFile(k.Path, p, 0o600); err != nil {
		t.Fatal(err)
	}
	return k
}

// NewAuthorizedKey generates an ed25519 key and returns its signer and
// its public key as an authorized_keys line without the newline, the form
// cloud APIs take (EC2 key pairs, GCP ssh-keys metadata, Azure osProfile).
func NewAuthorizedKey(t testing.TB) (ssh.Signer, string) {
	t.Helper()
	s, _ := newEd25519(t)
	return s, strings.TrimSpace(string(ssh.MarshalAuthorizedKey(s.PublicKey())))
}

func newEd25519(t testing.TB) (ssh.Signer, []byte) {
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

// LoginUser returns the name of the user running the test: a throwaway sshd
// started without root can only log that user in (as root it is root).
func LoginUser(t testing.TB) string {
	t.Helper()
	u, err := user.Current()
	if err != nil {
		t.Fatal(err)
	}
	return u.Username
}

// SSHD is a throwaway OpenSSH server on a loopback address, with its own
// generated ed25519 host key, authorizing the keys it was started with.
// StartSSHD registers its Kill in t.Cleanup.
type SSHD struct {
	// IP is the loopback address sshd listens on.
	IP string
	// Port is its TCP port.
	Port int

	dir string
	// netns is the network namespace sshd runs in (a /run/netns path; ""
	// is the test's own), see NetHost.StartSSHD.
	netns string
	// env is set in every session sshd starts (SetEnv), see
	// StartSSHDWithEnv.
	env map[string]string

	mu      sync.Mutex
	hostKey ssh.Signer
	proc    *sshd.Process
	stderr  *syncBuffer
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

// StartSSHD starts `sshd -D -e` on ip (a 127.0.0.0/8 address) and a free
// port, authorizing the given client keys. Without openssh-server the test
// is skipped (failed under CI). sshd and every connection it serves are
// killed by PID when the test ends.
func StartSSHD(t testing.TB, ip string, authorized ...ssh.PublicKey) *SSHD {
	t.Helper()
	return StartSSHDWithEnv(t, ip, nil, authorized...)
}

// StartSSHDWithEnv is StartSSHD with environment variables set in every
// session sshd starts (sshd_config SetEnv, which overrides sshd's own PATH
// too), and so in every process the host's login starts: a host whose
// tools or settings differ from this machine's (e.g. a fake nvidia-smi
// first on PATH).
func StartSSHDWithEnv(t testing.TB, ip string, env map[string]string, authorized ...ssh.PublicKey) *SSHD {
	t.Helper()
	if _, err := os.Stat(SSHDPath); err != nil {
		Missing(t, "openssh-server not installed (apt-get install openssh-server): %v", err)
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		t.Fatalf("listen on %s (a loopback address): %v", ip, err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	s := newSSHD(t, ip, port, "", authorized)
	s.env = env
	s.start(t, nil)
	return s
}

// startSSHD starts sshd on ip:port in the network namespace netns ("" is
// the test's own), authorizing the given client keys.
func startSSHD(t testing.TB, ip string, port int, netns string, authorized []ssh.PublicKey) *SSHD {
	t.Helper()
	s := newSSHD(t, ip, port, netns, authorized)
	s.start(t, nil)
	return s
}

// newSSHD prepares, without starting it, an sshd on ip:port in netns
// authorizing the given keys; its Kill is registered in t.Cleanup.
func newSSHD(t testing.TB, ip string, port int, netns string, authorized []ssh.PublicKey) *SSHD {
	t.Helper()
	s := &SSHD{IP: ip, Port: port, dir: t.TempDir(), netns: netns}
	var auth []byte
	for _, k := range authorized {
		auth = append(auth, ssh.MarshalAuthorizedKey(k)...)
	}
	if err := os.WriteFile(filepath.Join(s.dir, "authorized_keys"), auth, 0o600); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Kill)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("sshd %s stderr:\n%s", s.Addr(), s.Log())
		}
	})
	return s
}

// Addr returns ip:port.
func (s *SSHD) Addr() string { return net.JoinHostPort(s.IP, strconv.Itoa(s.Port)) }

// HostKey returns the public host key sshd presents now.
func (s *SSHD) HostKey() ssh.PublicKey {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.hostKey.PublicKey()
}

// KnownHostsLine returns the known_hosts line pinning sshd's current host
// key ("[ip]:port ssh-ed25519 …").
func (s *SSHD) KnownHostsLine() string {
	return knownhosts.Line([]string{knownhosts.Normalize(s.Addr())}, s.HostKey())
}

// WriteKnownHosts writes a known_hosts file pinning the current host keys of
// servers to path.
func WriteKnownHosts(t testing.TB, path string, servers ...*SSHD) {
	t.Helper()
	var b strings.Builder
	for _, s := range servers {
		b.WriteString(s.KnownHostsLine() + "\n")
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
}

// Log returns what sshd wrote to stderr since its last (re)start.
func (s *SSHD) Log() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stderr == nil {
		return ""
	}
	return s.stderr.String()
}

// PID returns the listener's process id (0 when not running).
func (s *SSHD) PID() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc == nil {
		return 0
	}
	return s.proc.PID()
}

// start (re)starts sshd with key (PEM), or with a new host key when key is
// nil, and waits until it accepts connections.
func (s *SSHD) start(t testing.TB, key []byte) {
	t.Helper()
	signer := s.hostKey
	if key == nil {
		signer, key = newEd25519(t)
	} else {
		var err error
		if signer, err = ssh.ParsePrivateKey(key); err != nil {
			t.Fatal(err)
		}
	}
	hk := filepath.Join(s.dir, "host_ed25519")
	if err := os.WriteFile(hk, key, 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(s.dir, "sshd_config")
	c := sshd.Config{
		IP:             s.IP,
		Port:           s.Port,
		HostKey:        hk,
		AuthorizedKeys: filepath.Join(s.dir, "authorized_keys"),
		PidFile:        filepath.Join(s.dir, "sshd.pid"),
		SetEnv:         s.env,
	}
	if err := c.Write(cfg); err != nil {
		t.Fatal(err)
	}
	if err := sshd.Check(cfg); err != nil {
		t.Fatal(err)
	}
	s.mu.Lock()
	s.hostKey = signer
	s.stderr = &syncBuffer{}
	p, err := sshd.StartInNetns(s.netns, cfg, s.stderr)
	if err != nil {
		s.mu.Unlock()
		t.Fatal(err)
	}
	s.proc = p
	s.mu.Unlock()
	if err := p.WaitListening(s.Addr(), 10*time.Second); err != nil {
		t.Fatalf("sshd on %s: %v\n%s", s.Addr(), err, s.Log())
	}
}

// Kill stops sshd and every per-connection sshd process it forked (by PID),
// so that established connections drop too: a host going away. Killing a
// stopped sshd does nothing.
func (s *SSHD) Kill() {
	s.mu.Lock()
	p := s.proc
	s.mu.Unlock()
	if p != nil {
		p.Kill()
	}
}

// Restart kills sshd and starts it again on the same address with the same
// host key (a host coming back).
func (s *SSHD) Restart(t testing.TB) {
	t.Helper()
	s.Kill()
	b, err := os.ReadFile(filepath.Join(s.dir, "host_ed25519"))
	if err != nil {
		t.Fatal(err)
	}
	s.start(t, b)
}

// RestartWithNewKey kills sshd and starts it again on the same address with
// a freshly generated host key (a reinstalled host, or a man in the middle).
func (s *SSHD) RestartWithNewKey(t testing.TB) {
	t.Helper()
	s.Kill()
	s.start(t, nil)
}

// RestartWithKey kills sshd and starts it again with the given host key
// (PEM), e.g. one saved with HostKeyPEM before RestartWithNewKey.
func (s *SSHD) RestartWithKey(t testing.TB, key []byte) {
	t.Helper()
	s.Kill()
	s.start(t, key)
}

// HostKeyPEM returns the private host key sshd uses now (PEM).
func (s *SSHD) HostKeyPEM(t testing.TB) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(s.dir, "host_ed25519"))
	if err != nil {
		t.Fatal(err)
	}
	return b
}
