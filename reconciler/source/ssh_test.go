package source

import (
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/pem"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	gliderssh "github.com/gliderlabs/ssh"
	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"
)

// sshGitServer serves git-upload-pack for repositories under root over an
// in-process SSH server that accepts one client key.
type sshGitServer struct {
	addr     string
	hostKeys []ssh.Signer
	keyFile  string // the accepted client's private key (PEM)
}

func newSSHGitServer(t *testing.T, root string, hostKeys ...ssh.Signer) *sshGitServer {
	t.Helper()
	requireGit(t)
	clientPub, clientPriv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	block, err := ssh.MarshalPrivateKey(clientPriv, "")
	if err != nil {
		t.Fatal(err)
	}
	keyFile := filepath.Join(t.TempDir(), "id_ed25519")
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(block), 0o600); err != nil {
		t.Fatal(err)
	}
	accepted, err := ssh.NewPublicKey(clientPub)
	if err != nil {
		t.Fatal(err)
	}
	srv := &gliderssh.Server{
		Handler: func(s gliderssh.Session) {
			// go-git sends: git-upload-pack '/specs.git'
			name, arg, _ := strings.Cut(s.RawCommand(), " ")
			if name != "git-upload-pack" {
				s.Exit(1)
				return
			}
			repo := filepath.Join(root, filepath.Clean("/"+strings.Trim(arg, "'")))
			cmd := exec.Command("git-upload-pack", repo)
			cmd.Env = gitEnv()
			cmd.Stdin, cmd.Stdout, cmd.Stderr = s, s, s.Stderr()
			code := 0
			if err := cmd.Run(); err != nil {
				code = 1
			}
			s.Exit(code)
		},
		PublicKeyHandler: func(_ gliderssh.Context, key gliderssh.PublicKey) bool {
			return gliderssh.KeysEqual(key, accepted)
		},
	}
	for _, k := range hostKeys {
		srv.AddHostKey(k)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return &sshGitServer{addr: ln.Addr().String(), hostKeys: hostKeys, keyFile: keyFile}
}

func ed25519Signer(t *testing.T) ssh.Signer {
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

func ecdsaSigner(t *testing.T) ssh.Signer {
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	s, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// knownHostsFile writes a known_hosts file pinning keys for addr.
func knownHostsFile(t *testing.T, addr string, keys ...ssh.PublicKey) string {
	var lines []string
	for _, k := range keys {
		lines = append(lines, knownhosts.Line([]string{knownhosts.Normalize(addr)}, k))
	}
	p := filepath.Join(t.TempDir(), "known_hosts")
	if err := os.WriteFile(p, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestRemoteOverSSHPinsHostKeys(t *testing.T) {
	requireGit(t)
	work := newGoGitRepo(t, "main")
	sha := work.commit(t, "first", map[string]string{"specs/a.yml": "v1"})
	root := t.TempDir()
	newBareRemote(t, root, "specs", work.dir)

	// The server offers ECDSA and ed25519; known_hosts pins only ed25519.
	// Without HostKeyAlgorithms set from known_hosts, x/crypto would
	// negotiate ECDSA first and fail with a key mismatch.
	edKey, ecKey := ed25519Signer(t), ecdsaSigner(t)
	srv := newSSHGitServer(t, root, ecKey, edKey)
	url := "ssh://git@" + srv.addr + "/specs.git"

	tests := []struct {
		name    string
		creds   Credentials
		wantErr string
	}{
		{"pinned ed25519 key", Credentials{SSHKeyFile: srv.keyFile,
			KnownHostsFile: knownHostsFile(t, srv.addr, edKey.PublicKey())}, ""},
		{"pinned ecdsa key", Credentials{SSHKeyFile: srv.keyFile,
			KnownHostsFile: knownHostsFile(t, srv.addr, ecKey.PublicKey())}, ""},
		{"wrong pinned key", Credentials{SSHKeyFile: srv.keyFile,
			KnownHostsFile: knownHostsFile(t, srv.addr, ed25519Signer(t).PublicKey())}, "key mismatch"},
		{"host not in known_hosts", Credentials{SSHKeyFile: srv.keyFile,
			KnownHostsFile: knownHostsFile(t, "127.0.0.9:22", edKey.PublicKey())}, "no key for"},
		{"client key not accepted", Credentials{SSHKeyFile: newSSHGitServer(t, root, edKey).keyFile,
			KnownHostsFile: knownHostsFile(t, srv.addr, edKey.PublicKey())}, "unable to authenticate"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src, err := Open(context.Background(), Config{Repo: url, Path: "specs", Credentials: tt.creds, Logger: testLogger(t)})
			if tt.wantErr != "" {
				if err == nil {
					t.Fatal("Open succeeded")
				}
				if !strings.Contains(err.Error(), tt.wantErr) {
					t.Errorf("error %q does not mention %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Open: %v", err)
			}
			rev := latest(t, src)
			if rev.ID != sha || rev.Branch != "main" {
				t.Errorf("Latest() = %s@%s, want %s@main", rev.ID, rev.Branch, sha)
			}
			if got := checkout(t, src, rev)["a.yml"]; got != "v1" {
				t.Errorf("a.yml = %q", got)
			}
		})
	}
}

func TestSSHKeyFileErrors(t *testing.T) {
	_, err := Open(context.Background(), Config{
		Repo: "git@127.0.0.1:specs.git", Credentials: Credentials{SSHKeyFile: "/nonexistent/key"},
	})
	if err == nil || !strings.Contains(err.Error(), "/nonexistent/key") {
		t.Errorf("error = %v, want one naming the key file", err)
	}
	if errors.Is(err, ErrBadURL) {
		t.Errorf("an scp-like URL was rejected as bad: %v", err)
	}
}
