package source

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"pgregory.net/rapid"
)

func TestOpenReportsUnusableConfig(t *testing.T) {
	requireGit(t)
	g := newGoGitRepo(t, "main")
	g.commit(t, "first", map[string]string{"specs/a.yml": "x"})
	plain := t.TempDir()
	remote := newRemoteFixture(t, nil)
	detached := newGoGitRepo(t, "main")
	sha := detached.commit(t, "first", map[string]string{"a.yml": "x"})
	gitCmd(t, detached.dir, "checkout", "-q", "--detach", sha)

	tests := []struct {
		name    string
		cfg     Config
		wantErr error  // checked with errors.Is when set
		wantMsg string // a substring of the message
	}{
		{"empty repo", Config{}, nil, "no repository"},
		{"missing local path", Config{Repo: filepath.Join(plain, "nope")}, ErrRepoNotFound, "nope"},
		{"a file, not a directory", Config{Repo: filepath.Join(g.dir, "specs/a.yml")}, nil, "not a directory"},
		{"missing local branch", Config{Repo: g.dir, Branch: "prod"}, ErrBranchNotFound, `"prod"`},
		{"detached HEAD without branch", Config{Repo: detached.dir}, nil, "detached"},
		{"path escaping the repository", Config{Repo: g.dir, Path: "../x"}, nil, "invalid path"},
		{"missing path in dev mode", Config{Repo: plain, Path: "specs"}, ErrPathNotFound, "specs"},
		{"missing path in the branch tip", Config{Repo: g.dir, Path: "spec"}, ErrPathNotFound, "spec not in main"},
		{"missing remote branch", Config{Repo: remote.url, Branch: "prod"}, ErrBranchNotFound, `"prod"`},
		{"remote repository that does not exist", Config{Repo: remote.baseURL + "/nope.git"}, nil, "nope.git"},
		{"unsupported scheme", Config{Repo: "ftp://example.com/x.git"}, ErrBadURL, "ftp"},
		{"malformed http url", Config{Repo: "http://"}, ErrBadURL, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.cfg.Logger = testLogger(t)
			src, err := Open(context.Background(), tt.cfg)
			if err == nil {
				t.Fatalf("Open succeeded: %s", src.Describe())
			}
			if tt.wantErr != nil && !errors.Is(err, tt.wantErr) {
				t.Errorf("error = %v, want %v", err, tt.wantErr)
			}
			if !strings.Contains(err.Error(), tt.wantMsg) {
				t.Errorf("error %q does not mention %q", err, tt.wantMsg)
			}
		})
	}
}

func TestOpenPicksTheKindOfSource(t *testing.T) {
	requireGit(t)
	g := newGoGitRepo(t, "main")
	g.commit(t, "first", map[string]string{"a.yml": "x"})
	remote := newRemoteFixture(t, nil)
	sub := filepath.Join(g.dir, "sub")
	writeFiles(t, g.dir, map[string]string{"sub/b.yml": "y"})

	tests := []struct{ name, repo, wantPrefix string }{
		{"local repository", g.dir, "git " + g.dir + "@main"},
		{"plain directory", t.TempDir(), "dir "},
		// A directory inside a work tree is a plain directory: edits show
		// without committing, which is what a sample spec directory wants.
		{"directory inside a work tree", sub, "dir " + sub},
		{"http url", remote.url, "git " + remote.url + "@main"},
		{"file url", "file://" + remote.bare, "git file://" + remote.bare + "@main"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := open(t, Config{Repo: tt.repo}).Describe(); !strings.HasPrefix(got, tt.wantPrefix) {
				t.Errorf("Describe() = %q, want prefix %q", got, tt.wantPrefix)
			}
		})
	}
}

func TestOpenExpandsTildeInLocalPaths(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	writeFiles(t, home, map[string]string{"specs/a.yml": "v1"})
	src := open(t, Config{Repo: "~/specs"})
	if got, want := src.Describe(), "dir "+filepath.Join(home, "specs"); got != want {
		t.Errorf("Describe() = %q, want %q", got, want)
	}
}

func TestIsURL(t *testing.T) {
	for repo, want := range map[string]bool{
		"https://github.com/o/r.git": true, "file:///srv/r.git": true, "ssh://git@h:2222/r": true,
		"git@github.com:o/r.git": true, "./specs": false, "/srv/specs": false, "specs": false,
		"C:/specs": false, "dir@2024/specs": false,
	} {
		if got := isURL(repo); got != want {
			t.Errorf("isURL(%q) = %v, want %v", repo, got, want)
		}
	}
}

func TestChangesCoalescesNudges(t *testing.T) {
	src := open(t, Config{Repo: t.TempDir()})
	for range 5 {
		src.Trigger()
	}
	if !waitNudge(src, time.Second) {
		t.Fatal("no nudge after Trigger")
	}
	if waitNudge(src, 50*time.Millisecond) {
		t.Error("five Triggers gave more than one pending nudge")
	}
}

func TestRunPollsAndStopsWithContext(t *testing.T) {
	src := open(t, Config{Repo: t.TempDir(), PollInterval: 30 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- src.Run(ctx) }()
	for i := range 3 { // the start nudge, then poll ticks
		if !waitNudge(src, 2*time.Second) {
			t.Fatalf("nudge %d did not come", i)
		}
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Run() = %v, want nil", err)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("Run did not return after cancel")
	}
}

func TestMemFSIsAValidFS(t *testing.T) {
	m := newMemFS(time.Unix(1, 0))
	m.add("a.yml", []byte("a"), 0o444, time.Unix(2, 0))
	m.add("dir/b.yml", []byte("bb"), 0o444, time.Unix(2, 0))
	m.add("dir/sub/c.yml", []byte("ccc"), 0o555, time.Unix(2, 0))
	m.add("dir/0.yml", []byte(""), 0o444, time.Unix(2, 0))
	m.seal()
	if err := fstest.TestFS(m, "a.yml", "dir/b.yml", "dir/sub/c.yml", "dir/0.yml"); err != nil {
		t.Fatal(err)
	}
	if _, err := fs.ReadFile(m, "nope"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("ReadFile(missing) error = %v", err)
	}
	if err := fstest.TestFS(newMemFS(time.Time{}).seal()); err != nil {
		t.Errorf("empty FS: %v", err)
	}
}

func TestIgnoredName(t *testing.T) {
	for name, want := range map[string]bool{
		".a.yml.swp": true, ".a.yml.swo": true, ".a.yml.swx": true, "a.yml~": true, "4913": true,
		".#a.yml": true, "#a.yml#": true, "a.yml___jb_tmp___": true, ".goutputstream-XYZ": true,
		"a.yml": false, "a.dstack.yml": false, "main.swift": false, "a.cue": false, "4914": false,
	} {
		if got := ignoredName(name); got != want {
			t.Errorf("ignoredName(%q) = %v, want %v", name, got, want)
		}
	}
}

func TestCredentialsNeverPrintSecrets(t *testing.T) {
	c := Credentials{Username: "ci", Password: "hunter2", SSHKeyFile: "/k", SSHKeyPassphrase: "pass-phrase"}
	for _, s := range []string{c.String(), fmt.Sprintf("%v", c), fmt.Sprintf("%+v", c), fmt.Sprintf("%#v", c), c.LogValue().String()} {
		if strings.Contains(s, "hunter2") || strings.Contains(s, "pass-phrase") {
			t.Errorf("printed a secret: %s", s)
		}
	}
	if got := redactURL("https://ci:hunter2@example.com/r.git"); strings.Contains(got, "hunter2") {
		t.Errorf("redactURL kept the password: %s", got)
	}
}

func TestMemFSMatchesMapFS(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		seg := rapid.SampledFrom([]string{"a", "b", "c.yml", "d.yml", "e"})
		paths := rapid.SliceOfNDistinct(rapid.Custom(func(t *rapid.T) string {
			return strings.Join(rapid.SliceOfN(seg, 1, 4).Draw(t, "segs"), "/")
		}), 0, 12, func(s string) string { return s }).Draw(t, "paths")
		m := newMemFS(time.Time{})
		want := fstest.MapFS{}
	next:
		for _, p := range paths {
			// A path cannot be both a file and a directory.
			for q := range want {
				if strings.HasPrefix(q, p+"/") || strings.HasPrefix(p, q+"/") {
					continue next
				}
			}
			m.add(p, []byte(p), 0o444, time.Time{})
			want[p] = &fstest.MapFile{Data: []byte(p), Mode: 0o444}
		}
		m.seal()
		var names []string
		for p := range want {
			names = append(names, p)
		}
		if err := fstest.TestFS(m, names...); err != nil {
			t.Fatal(err)
		}
		for _, dir := range append([]string{"."}, dirsOf(names)...) {
			got, err := fs.ReadDir(m, dir)
			if err != nil {
				t.Fatalf("ReadDir(%s): %v", dir, err)
			}
			exp, _ := fs.ReadDir(want, dir)
			if len(got) != len(exp) {
				t.Fatalf("ReadDir(%s): %d entries, want %d", dir, len(got), len(exp))
			}
			for i := range got {
				if got[i].Name() != exp[i].Name() || got[i].IsDir() != exp[i].IsDir() {
					t.Fatalf("ReadDir(%s)[%d] = %s, want %s", dir, i, got[i].Name(), exp[i].Name())
				}
			}
		}
	})
}

func dirsOf(names []string) []string {
	seen := map[string]bool{}
	for _, n := range names {
		for d := path.Dir(n); d != "."; d = path.Dir(d) {
			seen[d] = true
		}
	}
	var out []string
	for d := range seen {
		out = append(out, d)
	}
	return out
}
