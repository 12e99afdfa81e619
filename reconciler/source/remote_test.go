package source

import (
	"bytes"
	"context"
	"encoding/pem"
	"errors"
	"io/fs"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// remoteFixture is a work repository pushed to a bare repository that is
// served over HTTP by git-http-backend.
type remoteFixture struct {
	work    *goGitRepo
	root    string // GIT_PROJECT_ROOT
	bare    string // root/specs.git
	baseURL string
	url     string // http URL of specs.git
}

func newRemoteFixture(t *testing.T, wrap func(http.Handler) http.Handler) *remoteFixture {
	t.Helper()
	requireGit(t)
	f := &remoteFixture{work: newGoGitRepo(t, "main"), root: t.TempDir()}
	f.work.commit(t, "first", map[string]string{"specs/a.yml": "v1", "top.md": "x"})
	f.bare = newBareRemote(t, f.root, "specs", f.work.dir)
	f.baseURL = serveGit(t, f.root, wrap)
	f.url = f.baseURL + "/specs.git"
	return f
}

// commitAndPush commits to the work repository and pushes main.
func (f *remoteFixture) commitAndPush(t *testing.T, msg string, files map[string]string) string {
	t.Helper()
	sha := f.work.commit(t, msg, files)
	push(t, f.work.dir, f.bare, "main")
	return sha
}

func TestRemoteFollowsBranchOverHTTP(t *testing.T) {
	f := newRemoteFixture(t, nil)
	src := open(t, Config{Repo: f.url, Path: "specs"})
	if got, want := src.Describe(), "git "+f.url+"@main (specs/)"; got != want {
		t.Errorf("Describe() = %q, want %q", got, want)
	}

	rev := latest(t, src)
	if rev.ID != gitCmd(t, f.bare, "rev-parse", "main") || rev.Branch != "main" {
		t.Fatalf("Latest() = %+v", rev)
	}
	if rev.Message != "first" || rev.Author != "Grace Hopper <grace@example.com>" || !rev.Time.Equal(f.work.when) {
		t.Errorf("Latest() = %+v, want full metadata", rev)
	}
	if diff := cmp.Diff(map[string]string{"a.yml": "v1"}, checkout(t, src, rev)); diff != "" {
		t.Errorf("files (-want +got):\n%s", diff)
	}

	second := f.commitAndPush(t, "second", map[string]string{"specs/a.yml": "v2", "specs/b/c.yml": "c"})
	rev = latest(t, src)
	if rev.ID != second {
		t.Fatalf("Latest().ID = %s, want %s", rev.ID, second)
	}
	snap, err := src.Checkout(context.Background(), rev)
	if err != nil {
		t.Fatal(err)
	}
	if snap.Revision.Message != "second" || snap.Revision.Branch != "main" || snap.Revision.Time.IsZero() {
		t.Errorf("Snapshot.Revision = %+v", snap.Revision)
	}
	if diff := cmp.Diff(map[string]string{"a.yml": "v2", "b/c.yml": "c"}, snapshotFiles(t, snap)); diff != "" {
		t.Errorf("files (-want +got):\n%s", diff)
	}
}

func TestRemoteForcePushToOlderCommit(t *testing.T) {
	f := newRemoteFixture(t, nil)
	first := gitCmd(t, f.bare, "rev-parse", "main")
	f.commitAndPush(t, "second", map[string]string{"specs/a.yml": "v2"})
	third := f.commitAndPush(t, "third", map[string]string{"specs/a.yml": "v3"})
	src := open(t, Config{Repo: f.url, Path: "specs"})
	if got := checkout(t, src, latest(t, src))["a.yml"]; got != "v3" {
		t.Fatalf("a.yml = %q, want v3", got)
	}

	// Force-push main back to the first commit (a revert by reset).
	gitCmd(t, f.work.dir, "reset", "-q", "--hard", first)
	push(t, f.work.dir, f.bare, "main")
	rev := latest(t, src)
	if rev.ID != first {
		t.Fatalf("Latest().ID after force-push = %s, want %s", rev.ID, first)
	}
	if got := checkout(t, src, rev)["a.yml"]; got != "v1" {
		t.Errorf("a.yml after force-push = %q, want v1", got)
	}
	// And forward again to a commit that is now only in the past.
	gitCmd(t, f.work.dir, "reset", "-q", "--hard", third)
	push(t, f.work.dir, f.bare, "main")
	if got := checkout(t, src, latest(t, src))["a.yml"]; got != "v3" {
		t.Errorf("a.yml after pushing forward again = %q, want v3", got)
	}
}

func TestRemoteCheckoutAtArbitrarySHA(t *testing.T) {
	for _, exact := range []bool{false, true} {
		name := "server refuses unadvertised SHA"
		if exact {
			name = "server allows reachable SHA"
		}
		t.Run(name, func(t *testing.T) {
			f := newRemoteFixture(t, nil)
			if exact {
				gitCmd(t, f.bare, "config", "uploadpack.allowReachableSHA1InWant", "true")
			}
			first := gitCmd(t, f.bare, "rev-parse", "main")
			f.commitAndPush(t, "second", map[string]string{"specs/a.yml": "v2"})
			// A commit on another branch only, like a pull request head.
			gitCmd(t, f.work.dir, "checkout", "-q", "-b", "pr")
			pr := f.work.commit(t, "pr", map[string]string{"specs/a.yml": "pr"})
			push(t, f.work.dir, f.bare, "pr")

			src := open(t, Config{Repo: f.url, Path: "specs"})
			for id, want := range map[string]string{first: "v1", pr: "pr"} {
				snap, err := src.CheckoutAt(context.Background(), id)
				if err != nil {
					t.Fatalf("CheckoutAt(%s): %v", id, err)
				}
				if snap.Revision.ID != id {
					t.Errorf("Revision.ID = %s, want %s", snap.Revision.ID, id)
				}
				if got := snapshotFiles(t, snap)["a.yml"]; got != want {
					t.Errorf("CheckoutAt(%s) a.yml = %q, want %q", id, got, want)
				}
			}
			_, err := src.CheckoutAt(context.Background(), strings.Repeat("0f", 20))
			if !errors.Is(err, ErrRevisionNotFound) {
				t.Errorf("CheckoutAt(unknown) error = %v, want ErrRevisionNotFound", err)
			}
			if _, err := src.CheckoutAt(context.Background(), "main"); !errors.Is(err, ErrRevisionNotFound) {
				t.Errorf("CheckoutAt(branch name) error = %v, want ErrRevisionNotFound", err)
			}
		})
	}
}

func TestRemoteCheckoutOfARevisionTheBranchMovedPast(t *testing.T) {
	f := newRemoteFixture(t, nil)
	src := open(t, Config{Repo: f.url, Path: "specs"})
	rev := latest(t, src)
	f.commitAndPush(t, "second", map[string]string{"specs/a.yml": "v2"})
	// Checkout returns exactly the revision asked for, not the new tip.
	if got := checkout(t, src, rev)["a.yml"]; got != "v1" {
		t.Errorf("a.yml = %q, want v1", got)
	}
}

func TestRemoteOverFileURLWithCacheDir(t *testing.T) {
	requireGit(t)
	work := newGoGitRepo(t, "trunk")
	sha := work.commit(t, "first", map[string]string{"a.yml": "v1"})
	bare := newBareRemote(t, t.TempDir(), "specs", work.dir)
	cache := t.TempDir()
	// Left behind by a killed process: one long ago, one maybe still in use.
	long := time.Now().Add(-time.Hour)
	writeFiles(t, cache, map[string]string{"fetch-old/HEAD": "x", "fetch-new/HEAD": "x"})
	os.Chtimes(filepath.Join(cache, "fetch-old"), long, long)

	src := open(t, Config{Repo: "file://" + bare, CacheDir: cache})
	if _, err := os.Stat(filepath.Join(cache, "fetch-old")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a stale fetch directory survived Open: %v", err)
	}
	if _, err := os.Stat(filepath.Join(cache, "fetch-new")); err != nil {
		t.Errorf("a recent fetch directory was removed: %v", err)
	}
	os.RemoveAll(filepath.Join(cache, "fetch-new"))
	rev := latest(t, src)
	if rev.ID != sha || rev.Branch != "trunk" {
		t.Fatalf("Latest() = %s@%s, want %s@trunk (the remote HEAD)", rev.ID, rev.Branch, sha)
	}
	if got := checkout(t, src, rev)["a.yml"]; got != "v1" {
		t.Errorf("a.yml = %q", got)
	}
	if left, _ := os.ReadDir(cache); len(left) != 0 {
		t.Errorf("CacheDir holds %d entries after the checkout, want none", len(left))
	}
}

func TestRemoteBasicAuth(t *testing.T) {
	const user, pass = "ci", "s3cret-token"
	var denied atomic.Int32
	f := newRemoteFixture(t, func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if u, p, ok := r.BasicAuth(); !ok || u != user || p != pass {
				denied.Add(1)
				w.Header().Set("WWW-Authenticate", `Basic realm="git"`)
				http.Error(w, "unauthorized", http.StatusUnauthorized)
				return
			}
			h.ServeHTTP(w, r)
		})
	})
	withUserInfo := strings.Replace(f.url, "http://", "http://"+user+":"+pass+"@", 1)
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))

	tests := []struct {
		name string
		cfg  Config
		env  map[string]string
		ok   bool
	}{
		{"no credentials", Config{Repo: f.url}, nil, false},
		{"wrong password", Config{Repo: f.url, Credentials: Credentials{Username: user, Password: "nope"}}, nil, false},
		{"user-info in the URL", Config{Repo: withUserInfo}, nil, true},
		{"explicit credentials", Config{Repo: f.url, Credentials: Credentials{Username: user, Password: pass}}, nil, true},
		{"environment", Config{Repo: f.url}, map[string]string{EnvGitUsername: user, EnvGitToken: pass}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			tt.cfg.Logger = log
			src, err := Open(context.Background(), tt.cfg)
			if !tt.ok {
				if err == nil {
					t.Fatal("Open succeeded without valid credentials")
				}
				if strings.Contains(err.Error(), pass) {
					t.Errorf("error leaks the password: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Open: %v", err)
			}
			if strings.Contains(src.Describe(), pass) {
				t.Errorf("Describe() leaks the password: %s", src.Describe())
			}
			if got := checkout(t, src, latest(t, src))["specs/a.yml"]; got != "v1" {
				t.Errorf("specs/a.yml = %q", got)
			}
		})
	}
	if denied.Load() == 0 {
		t.Error("the server never refused a request: the test proves nothing")
	}
	if strings.Contains(logs.String(), pass) {
		t.Errorf("logs leak the password:\n%s", logs.String())
	}
}

func TestRemoteCheckoutOfARevisionWithoutBranch(t *testing.T) {
	f := newRemoteFixture(t, nil)
	first := gitCmd(t, f.bare, "rev-parse", "main")
	f.commitAndPush(t, "second", map[string]string{"specs/a.yml": "v2"})
	src := open(t, Config{Repo: f.url, Path: "specs"})
	// What a caller holding only a SHA passes (a pull request plan).
	if got := checkout(t, src, Revision{ID: first})["a.yml"]; got != "v1" {
		t.Errorf("a.yml = %q, want v1", got)
	}
}

func TestRemoteOverHTTPSWithAPrivateCA(t *testing.T) {
	requireGit(t)
	work := newGoGitRepo(t, "main")
	sha := work.commit(t, "first", map[string]string{"a.yml": "v1"})
	root := t.TempDir()
	newBareRemote(t, root, "specs", work.dir)
	srv := httptest.NewTLSServer(gitHandler(t, root, nil))
	t.Cleanup(srv.Close)
	ca := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	url := srv.URL + "/specs.git"

	if _, err := Open(context.Background(), Config{Repo: url, Logger: testLogger(t)}); err == nil ||
		!strings.Contains(err.Error(), "certificate") {
		t.Errorf("Open without the CA: error = %v, want a certificate error", err)
	}
	src := open(t, Config{Repo: url, Credentials: Credentials{CAFile: ca}})
	if rev := latest(t, src); rev.ID != sha {
		t.Errorf("Latest().ID = %s, want %s", rev.ID, sha)
	}
	if got := checkout(t, src, latest(t, src))["a.yml"]; got != "v1" {
		t.Errorf("a.yml = %q", got)
	}
	if _, err := Open(context.Background(), Config{Repo: url, Credentials: Credentials{CAFile: work.dir + "/a.yml"}}); err == nil {
		t.Error("Open with a CA file holding no certificate succeeded")
	}
}

func TestRemoteLatestFetchesANewTipOnce(t *testing.T) {
	var fetches atomic.Int32
	f := newRemoteFixture(t, func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/git-upload-pack") {
				fetches.Add(1)
			}
			h.ServeHTTP(w, r)
		})
	})
	src := open(t, Config{Repo: f.url, Path: "specs"})
	for i := range 3 {
		rev := latest(t, src)
		checkout(t, src, rev)
		if got := fetches.Load(); got != 1 {
			t.Fatalf("after Latest+Checkout #%d: %d fetches, want 1", i+1, got)
		}
	}
	// A tip whose tree lacks Path: Latest has the metadata, Checkout the
	// error, and polling does not fetch it again and again.
	f.commitAndPush(t, "specs gone", map[string]string{"specs/a.yml": ""})
	for range 3 {
		rev := latest(t, src)
		if rev.Message != "specs gone" {
			t.Fatalf("Latest().Message = %q", rev.Message)
		}
		if _, err := src.Checkout(context.Background(), rev); !errors.Is(err, ErrPathNotFound) {
			t.Fatalf("Checkout error = %v, want ErrPathNotFound", err)
		}
	}
	if got := fetches.Load(); got != 2 {
		t.Errorf("%d fetches for two tips, want 2", got)
	}
}
