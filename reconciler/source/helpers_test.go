package source

import (
	"context"
	"hoist/e2e/testenv"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"net/http/cgi"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
)

// gitEnv isolates the git CLI from the machine's configuration and proxies.
func gitEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch strings.ToLower(k) {
		case "http_proxy", "https_proxy", "no_proxy", "all_proxy", "git_dir", "git_work_tree":
			continue
		}
		env = append(env, kv)
	}
	return append(env,
		"GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1",
		// No background auto-gc racing with a test's own gc.
		"GIT_CONFIG_COUNT=1", "GIT_CONFIG_KEY_0=gc.auto", "GIT_CONFIG_VALUE_0=0",
		"GIT_AUTHOR_NAME=Ada CLI", "GIT_AUTHOR_EMAIL=ada@example.com",
		"GIT_COMMITTER_NAME=Ada CLI", "GIT_COMMITTER_EMAIL=ada@example.com",
	)
}

// gitCmd runs the git CLI in dir and returns its trimmed output.
func gitCmd(tb testing.TB, dir string, args ...string) string {
	tb.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = gitEnv()
	out, err := cmd.CombinedOutput()
	if err != nil {
		tb.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

func requireGit(tb testing.TB) {
	tb.Helper()
	testenv.Require(tb, "git")
}

// writeFiles writes name → content under dir; an empty content removes.
func writeFiles(tb testing.TB, dir string, files map[string]string) {
	tb.Helper()
	for name, content := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if content == "" {
			if err := os.Remove(p); err != nil {
				tb.Fatal(err)
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			tb.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			tb.Fatal(err)
		}
	}
}

// goGitRepo is a non-bare repository made and committed to with go-git.
type goGitRepo struct {
	dir  string
	repo *git.Repository
	when time.Time
}

func newGoGitRepo(tb testing.TB, branch string) *goGitRepo {
	tb.Helper()
	dir := tb.TempDir()
	repo, err := git.PlainInitWithOptions(dir, &git.PlainInitOptions{
		InitOptions: git.InitOptions{DefaultBranch: plumbing.NewBranchReferenceName(branch)},
	})
	if err != nil {
		tb.Fatal(err)
	}
	return &goGitRepo{dir: dir, repo: repo, when: time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)}
}

// commit writes files (empty content removes) and commits all of them.
func (g *goGitRepo) commit(tb testing.TB, msg string, files map[string]string) string {
	tb.Helper()
	writeFiles(tb, g.dir, files)
	wt, err := g.repo.Worktree()
	if err != nil {
		tb.Fatal(err)
	}
	if err := wt.AddWithOptions(&git.AddOptions{All: true}); err != nil {
		tb.Fatal(err)
	}
	g.when = g.when.Add(time.Minute)
	sig := &object.Signature{Name: "Grace Hopper", Email: "grace@example.com", When: g.when}
	h, err := wt.Commit(msg, &git.CommitOptions{Author: sig, Committer: sig, AllowEmptyCommits: true})
	if err != nil {
		tb.Fatal(err)
	}
	return h.String()
}

// serveGit serves every repository under root over smart HTTP with the
// real git-http-backend. wrap, if not nil, wraps the handler (for auth).
func serveGit(tb testing.TB, root string, wrap func(http.Handler) http.Handler) string {
	tb.Helper()
	srv := httptest.NewServer(gitHandler(tb, root, wrap))
	tb.Cleanup(srv.Close)
	return srv.URL
}

func gitHandler(tb testing.TB, root string, wrap func(http.Handler) http.Handler) http.Handler {
	tb.Helper()
	requireGit(tb)
	execPath := gitCmd(tb, root, "--exec-path")
	var h http.Handler = &cgi.Handler{
		Path: filepath.Join(execPath, "git-http-backend"),
		Env:  append(gitEnv(), "GIT_PROJECT_ROOT="+root, "GIT_HTTP_EXPORT_ALL=1"),
	}
	if wrap != nil {
		h = wrap(h)
	}
	return h
}

// newBareRemote makes root/name.git as a bare clone of src and returns its path.
func newBareRemote(tb testing.TB, root, name, src string) string {
	tb.Helper()
	p := filepath.Join(root, name+".git")
	gitCmd(tb, root, "clone", "-q", "--bare", src, p)
	return p
}

// push pushes the branch of work to the bare repository at bare, forcing.
func push(tb testing.TB, work, bare, branch string) {
	tb.Helper()
	gitCmd(tb, work, "push", "-q", "--force", bare, branch+":"+branch)
}

func testLogger(tb testing.TB) *slog.Logger {
	if testing.Verbose() {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

func open(tb testing.TB, cfg Config) Source {
	tb.Helper()
	if cfg.Logger == nil {
		cfg.Logger = testLogger(tb)
	}
	src, err := Open(context.Background(), cfg)
	if err != nil {
		tb.Fatalf("Open(%+v): %v", cfg.Repo, err)
	}
	return src
}

// runSource runs src until the test ends and drains the first nudge Run
// sends once its watchers are up.
func runSource(tb testing.TB, src Source) {
	tb.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := src.Run(ctx); err != nil {
			tb.Errorf("Run: %v", err)
		}
	}()
	tb.Cleanup(func() { cancel(); <-done })
	if !waitNudge(src, 5*time.Second) {
		tb.Fatal("no nudge after Run started")
	}
}

// waitNudge reports whether a nudge arrives within d.
func waitNudge(src Source, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-src.Changes():
		return true
	case <-t.C:
		return false
	}
}

// snapshotFiles returns every file of a snapshot as path → content.
func snapshotFiles(tb testing.TB, snap *Snapshot) map[string]string {
	tb.Helper()
	files := map[string]string{}
	err := fs.WalkDir(snap.FS, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(snap.FS, p)
		files[p] = string(b)
		return err
	})
	if err != nil {
		tb.Fatal(err)
	}
	return files
}

func latest(tb testing.TB, src Source) Revision {
	tb.Helper()
	rev, err := src.Latest(context.Background())
	if err != nil {
		tb.Fatalf("Latest: %v", err)
	}
	return rev
}

func checkout(tb testing.TB, src Source, rev Revision) map[string]string {
	tb.Helper()
	snap, err := src.Checkout(context.Background(), rev)
	if err != nil {
		tb.Fatalf("Checkout(%s): %v", rev.ID, err)
	}
	defer snap.Close()
	if snap.Revision.ID != rev.ID {
		tb.Fatalf("Checkout(%s) returned revision %s", rev.ID, snap.Revision.ID)
	}
	return snapshotFiles(tb, snap)
}
