package source

import (
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/go-git/go-git/v5/plumbing/transport"
	"golang.org/x/crypto/ssh"
)

// treeFiles reads every file of a mirrored tree.
func treeFiles(t *testing.T, tr *Tree) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := tr.Walk(func(e TreeEntry) error {
		if e.Dir {
			out[e.Path+"/"] = ""
			return nil
		}
		rc, err := tr.Open(e.Blob)
		if err != nil {
			return err
		}
		defer rc.Close()
		b, err := io.ReadAll(rc)
		out[e.Path] = string(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestMirrors_fetchDefaultBranchBranchAndHashWithATokenReusingTheMirror(t *testing.T) {
	const token = "tok-123"
	var packs atomic.Int32
	f := newRemoteFixture(t, func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if _, p, ok := r.BasicAuth(); !ok || p != token {
				w.Header().Set("WWW-Authenticate", `Basic realm="git"`)
				http.Error(w, "unauthorized", http.StatusUnauthorized)
				return
			}
			if strings.HasSuffix(r.URL.Path, "/git-upload-pack") {
				packs.Add(1)
			}
			h.ServeHTTP(w, r)
		})
	})
	first := gitCmd(t, f.bare, "rev-parse", "main")
	m := NewMirrors(t.TempDir(), testLogger(t))
	creds := Credentials{Username: "anything", Password: token}
	ctx := context.Background()

	if _, err := m.Fetch(ctx, f.url, Credentials{}, MirrorRef{}); !errors.Is(err, transport.ErrAuthenticationRequired) {
		t.Fatalf("Fetch without the token = %v, want authentication required", err)
	}
	tr, err := m.Fetch(ctx, f.url, creds, MirrorRef{})
	if err != nil {
		t.Fatal(err)
	}
	if got := treeFiles(t, tr); got["specs/a.yml"] != "v1" || got["top.md"] != "x" || tr.Commit != first {
		t.Fatalf("default branch tree at %s = %v", tr.Commit, got)
	}
	tr.Close()

	second := f.commitAndPush(t, "second", map[string]string{"specs/a.yml": "v2"})
	tr, err = m.Fetch(ctx, f.url, creds, MirrorRef{Branch: "main"})
	if err != nil {
		t.Fatal(err)
	}
	if got := treeFiles(t, tr); got["specs/a.yml"] != "v2" || tr.Commit != second {
		t.Fatalf("branch main at %s = %v, want the pushed commit", tr.Commit, got)
	}
	tr.Close()

	// A hash the mirror holds needs no fetch.
	before := packs.Load()
	tr, err = m.Fetch(ctx, f.url, creds, MirrorRef{Hash: first})
	if err != nil {
		t.Fatal(err)
	}
	if got := treeFiles(t, tr); got["specs/a.yml"] != "v1" || packs.Load() != before {
		t.Fatalf("hash %s = %v after %d fetches, want v1 from the mirror", first, got, packs.Load()-before)
	}
	tr.Close()

	if _, err := m.Fetch(ctx, f.url, creds, MirrorRef{Branch: "nope"}); !errors.Is(err, ErrBranchNotFound) {
		t.Errorf("Fetch of a missing branch = %v, want ErrBranchNotFound", err)
	}
	if _, err := m.Fetch(ctx, f.url, creds, MirrorRef{Hash: strings.Repeat("a", 40)}); err == nil {
		t.Error("Fetch of a missing hash succeeded")
	}
}

func TestMirrors_refuseFileURLsAndSSHWithoutKnownHosts(t *testing.T) {
	m := NewMirrors(t.TempDir(), testLogger(t))
	for _, tc := range []struct {
		url   string
		creds Credentials
	}{
		{"file:///etc", Credentials{}},
		{"git@example.com:org/r.git", Credentials{}},
		{"ssh://git@example.com/org/r.git", Credentials{SSHKey: "k"}},
	} {
		if _, err := m.Fetch(context.Background(), tc.url, tc.creds, MirrorRef{}); err == nil {
			t.Errorf("Fetch(%s) succeeded", tc.url)
		}
	}
}

// TestMirrors_sshWithAKeyAndKnownHostsByValue fetches over SSH with the
// private key and known_hosts given as values (project secrets), pinning
// the host key: a wrong pinned key is refused.
func TestMirrors_sshWithAKeyAndKnownHostsByValue(t *testing.T) {
	work := newGoGitRepo(t, "main")
	sha := work.commit(t, "first", map[string]string{"a.txt": "over ssh"})
	root := t.TempDir()
	newBareRemote(t, root, "lib", work.dir)
	hostKey := ed25519Signer(t)
	srv := newSSHGitServer(t, root, hostKey)
	key, err := os.ReadFile(srv.keyFile)
	if err != nil {
		t.Fatal(err)
	}
	known := func(k ssh.PublicKey) string {
		b, err := os.ReadFile(knownHostsFile(t, srv.addr, k))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	m := NewMirrors(t.TempDir(), testLogger(t))
	url := "ssh://git@" + srv.addr + "/lib.git"
	tr, err := m.Fetch(context.Background(), url, Credentials{SSHKey: string(key), KnownHosts: known(hostKey.PublicKey())}, MirrorRef{Branch: "main"})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	if got := treeFiles(t, tr); got["a.txt"] != "over ssh" || tr.Commit != sha {
		t.Fatalf("tree at %s = %v", tr.Commit, got)
	}
	_, err = m.Fetch(context.Background(), url, Credentials{SSHKey: string(key), KnownHosts: known(ed25519Signer(t).PublicKey())}, MirrorRef{Branch: "main"})
	if err == nil || !strings.Contains(err.Error(), "key mismatch") {
		t.Fatalf("Fetch with a wrong pinned host key = %v, want a key mismatch", err)
	}
}
