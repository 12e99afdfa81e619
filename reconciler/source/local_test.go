package source

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestLocalGitReadsCommittedFilesWithoutCheckout(t *testing.T) {
	g := newGoGitRepo(t, "trunk")
	first := g.commit(t, "add hello\n\nbody", map[string]string{
		"specs/hello.dstack.yml": "type: task\nname: hello\n",
		"specs/sub/train.yml":    "type: task\nname: train\n",
		"README.md":              "not a spec",
	})
	// Uncommitted edits in the work tree are not part of any revision.
	writeFiles(t, g.dir, map[string]string{"specs/hello.dstack.yml": "dirty"})

	src := open(t, Config{Repo: g.dir, Path: "specs"})
	if got, want := src.Describe(), "git "+g.dir+"@trunk (specs/)"; got != want {
		t.Errorf("Describe() = %q, want %q", got, want)
	}
	rev := latest(t, src)
	want := Revision{
		ID: first, Branch: "trunk", Author: "Grace Hopper <grace@example.com>",
		Message: "add hello\n\nbody", Time: g.when,
	}
	if diff := cmp.Diff(want, rev, cmp.Comparer(func(a, b time.Time) bool { return a.Equal(b) })); diff != "" {
		t.Errorf("Latest() mismatch (-want +got):\n%s", diff)
	}
	files := checkout(t, src, rev)
	if diff := cmp.Diff(map[string]string{
		"hello.dstack.yml": "type: task\nname: hello\n",
		"sub/train.yml":    "type: task\nname: train\n",
	}, files); diff != "" {
		t.Errorf("snapshot files (-want +got):\n%s", diff)
	}
}

func TestLocalGitCheckoutAtOlderRevisions(t *testing.T) {
	g := newGoGitRepo(t, "main")
	first := g.commit(t, "one", map[string]string{"a.yml": "v1"})
	second := g.commit(t, "two", map[string]string{"a.yml": "v2", "b.yml": "new"})
	src := open(t, Config{Repo: g.dir})

	tests := []struct {
		name, id string
		want     map[string]string
		wantID   string
	}{
		{"full sha of an older commit", first, map[string]string{"a.yml": "v1"}, first},
		{"short sha", second[:10], map[string]string{"a.yml": "v2", "b.yml": "new"}, second},
		{"rev-parse expression", "main~1", map[string]string{"a.yml": "v1"}, first},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			snap, err := src.CheckoutAt(context.Background(), tt.id)
			if err != nil {
				t.Fatal(err)
			}
			if snap.Revision.ID != tt.wantID {
				t.Errorf("Revision.ID = %s, want %s", snap.Revision.ID, tt.wantID)
			}
			if diff := cmp.Diff(tt.want, snapshotFiles(t, snap)); diff != "" {
				t.Errorf("files (-want +got):\n%s", diff)
			}
		})
	}
	if _, err := src.CheckoutAt(context.Background(), strings.Repeat("ab", 20)); !errors.Is(err, ErrRevisionNotFound) {
		t.Errorf("CheckoutAt(unknown sha) error = %v, want ErrRevisionNotFound", err)
	}
}

func TestLocalGitPathMissingInRevision(t *testing.T) {
	g := newGoGitRepo(t, "main")
	g.commit(t, "specs", map[string]string{"specs/a.yml": "x"})
	src := open(t, Config{Repo: g.dir, Path: "specs/"})
	g.commit(t, "move specs away", map[string]string{"specs/a.yml": "", "other/a.yml": "x"})
	_, err := src.Checkout(context.Background(), latest(t, src))
	if !errors.Is(err, ErrPathNotFound) {
		t.Fatalf("Checkout error = %v, want ErrPathNotFound", err)
	}
}

func TestLocalGitTracksBranchNotHEAD(t *testing.T) {
	requireGit(t)
	g := newGoGitRepo(t, "main")
	onMain := g.commit(t, "on main", map[string]string{"a.yml": "main"})
	src := open(t, Config{Repo: g.dir})
	// The user switches the work tree to a feature branch and commits there:
	// the tracked branch (HEAD's branch at Open) does not change.
	gitCmd(t, g.dir, "checkout", "-q", "-b", "feature")
	writeFiles(t, g.dir, map[string]string{"a.yml": "feature"})
	gitCmd(t, g.dir, "commit", "-q", "-am", "on feature")
	if rev := latest(t, src); rev.ID != onMain || rev.Branch != "main" {
		t.Errorf("Latest() = %s@%s, want %s@main", rev.ID, rev.Branch, onMain)
	}
}

func TestLocalGitSeesCLICommitsAndSurvivesRepack(t *testing.T) {
	requireGit(t)
	dir := t.TempDir()
	gitCmd(t, dir, "init", "-q", "-b", "main")
	writeFiles(t, dir, map[string]string{"specs/a.yml": "v1"})
	gitCmd(t, dir, "add", "-A")
	gitCmd(t, dir, "commit", "-q", "-m", "first")
	gitCmd(t, dir, "gc", "-q") // packed from the start, so go-git loads a pack index

	src := open(t, Config{Repo: dir, Path: "specs", Debounce: 20 * time.Millisecond, PollInterval: time.Hour})
	runSource(t, src)
	rev := latest(t, src)
	if rev.Author != "Ada CLI <ada@example.com>" || rev.Message != "first" {
		t.Errorf("Latest() = %+v, want the CLI commit", rev)
	}
	checkout(t, src, rev)

	for i := 2; i <= 4; i++ {
		writeFiles(t, dir, map[string]string{"specs/a.yml": fmt.Sprintf("v%d", i)})
		gitCmd(t, dir, "commit", "-q", "-am", fmt.Sprintf("commit %d", i))
		if i == 3 {
			// Pack every object and delete the loose ones: an open go-git
			// repository has a stale pack index now.
			gitCmd(t, dir, "gc", "-q", "--prune=now")
		}
		if !waitNudge(src, 5*time.Second) {
			t.Fatalf("commit %d: no nudge", i)
		}
		rev = latest(t, src)
		if rev.Message != fmt.Sprintf("commit %d", i) {
			t.Fatalf("after commit %d Latest().Message = %q", i, rev.Message)
		}
		if got := checkout(t, src, rev)["a.yml"]; got != fmt.Sprintf("v%d", i) {
			t.Fatalf("after commit %d a.yml = %q", i, got)
		}
	}
}

func TestLocalGitNudgesOnPackedRefsAndNewBranchDirs(t *testing.T) {
	requireGit(t)
	dir := t.TempDir()
	gitCmd(t, dir, "init", "-q", "-b", "team/main")
	writeFiles(t, dir, map[string]string{"a.yml": "v1"})
	gitCmd(t, dir, "add", "-A")
	gitCmd(t, dir, "commit", "-q", "-m", "first")
	src := open(t, Config{Repo: dir, Debounce: 20 * time.Millisecond, PollInterval: time.Hour})
	runSource(t, src)

	// A branch under a directory created after the watch started.
	gitCmd(t, dir, "branch", "other/x")
	if !waitNudge(src, 5*time.Second) {
		t.Fatal("no nudge for a branch in a new refs directory")
	}
	// pack-refs moves the tracked ref into packed-refs; it still resolves.
	gitCmd(t, dir, "pack-refs", "--all")
	if !waitNudge(src, 5*time.Second) {
		t.Fatal("no nudge for pack-refs")
	}
	want := gitCmd(t, dir, "rev-parse", "HEAD")
	if rev := latest(t, src); rev.ID != want || rev.Branch != "team/main" {
		t.Errorf("Latest() = %s@%s, want %s@team/main", rev.ID, rev.Branch, want)
	}
}

func TestLocalGitUnbornBranchWaitsForFirstCommit(t *testing.T) {
	requireGit(t)
	dir := t.TempDir()
	gitCmd(t, dir, "init", "-q", "-b", "main")
	src := open(t, Config{Repo: dir, Debounce: 20 * time.Millisecond, PollInterval: time.Hour})
	if _, err := src.Latest(context.Background()); !errors.Is(err, ErrBranchNotFound) {
		t.Fatalf("Latest() on an empty repository: error = %v, want ErrBranchNotFound", err)
	}
	runSource(t, src)
	writeFiles(t, dir, map[string]string{"a.yml": "v1"})
	gitCmd(t, dir, "add", "-A")
	gitCmd(t, dir, "commit", "-q", "-m", "first")
	if !waitNudge(src, 5*time.Second) {
		t.Fatal("no nudge for the first commit")
	}
	if rev := latest(t, src); rev.Message != "first" {
		t.Errorf("Latest().Message = %q, want first", rev.Message)
	}
}

func TestLocalGitLinkedWorktreeAndBareRepository(t *testing.T) {
	requireGit(t)
	dir := t.TempDir()
	main := dir + "/main"
	gitCmd(t, dir, "init", "-q", "-b", "main", main)
	writeFiles(t, main, map[string]string{"a.yml": "v1"})
	gitCmd(t, main, "add", "-A")
	gitCmd(t, main, "commit", "-q", "-m", "first")
	gitCmd(t, main, "worktree", "add", "-q", "-b", "wt", dir+"/wt")
	gitCmd(t, dir, "clone", "-q", "--bare", main, dir+"/bare.git")

	for _, repo := range []string{dir + "/wt", dir + "/bare.git"} {
		t.Run(repo[len(dir)+1:], func(t *testing.T) {
			src := open(t, Config{Repo: repo, Debounce: 20 * time.Millisecond, PollInterval: time.Hour})
			runSource(t, src)
			if got := checkout(t, src, latest(t, src)); got["a.yml"] != "v1" {
				t.Errorf("a.yml = %q", got["a.yml"])
			}
			if repo == dir+"/wt" {
				writeFiles(t, repo, map[string]string{"a.yml": "v2"})
				gitCmd(t, repo, "commit", "-q", "-am", "second")
				if !waitNudge(src, 5*time.Second) {
					t.Fatal("no nudge for a commit in a linked work tree")
				}
				if rev := latest(t, src); rev.Message != "second" || rev.Branch != "wt" {
					t.Errorf("Latest() = %+v", rev)
				}
			}
		})
	}
}

func TestLocalGitSnapshotsStayCorrectAcrossTreeReuse(t *testing.T) {
	g := newGoGitRepo(t, "main")
	want := map[string]string{}
	apply := func(files map[string]string) {
		for k, v := range files {
			if v == "" {
				delete(want, k)
			} else {
				want[k] = v
			}
		}
	}
	steps := []struct {
		name  string
		files map[string]string
	}{
		{"initial", map[string]string{"specs/a/x.yml": "ax", "specs/a/y.yml": "ay", "specs/b/x.yml": "bx", "specs/top.yml": "t"}},
		{"one file changes", map[string]string{"specs/a/x.yml": "ax2"}},
		{"a copy of a directory (same tree hash twice)", map[string]string{"specs/c/x.yml": "ax2", "specs/c/y.yml": "ay"}},
		{"the original of the copy goes", map[string]string{"specs/a/x.yml": "", "specs/a/y.yml": ""}},
		{"a file moves between directories", map[string]string{"specs/b/x.yml": "", "specs/c/z.yml": "bx"}},
		{"a new nested directory", map[string]string{"specs/d/e/f.yml": "f"}},
		{"everything but one file goes", map[string]string{"specs/c/x.yml": "", "specs/c/y.yml": "", "specs/c/z.yml": "", "specs/d/e/f.yml": ""}},
	}
	var src Source // opened after the first commit
	var revs []Revision
	var wants []map[string]string
	for i, step := range steps {
		g.commit(t, step.name, step.files)
		apply(step.files)
		if i == 0 {
			src = open(t, Config{Repo: g.dir, Path: "specs"})
		}
		rev := latest(t, src)
		snap, err := src.Checkout(context.Background(), rev)
		if err != nil {
			t.Fatalf("%s: %v", step.name, err)
		}
		got := snapshotFiles(t, snap)
		expect := map[string]string{}
		for k, v := range want {
			expect[strings.TrimPrefix(k, "specs/")] = v
		}
		if diff := cmp.Diff(expect, got); diff != "" {
			t.Fatalf("%s: files (-want +got):\n%s", step.name, diff)
		}
		var names []string
		for k := range got {
			names = append(names, k)
		}
		if err := fstest.TestFS(snap.FS, names...); err != nil {
			t.Fatalf("%s: %v", step.name, err)
		}
		revs, wants = append(revs, rev), append(wants, expect)
	}
	// Going back to older revisions reuses in the other direction.
	for i := len(revs) - 1; i >= 0; i-- {
		snap, err := src.CheckoutAt(context.Background(), revs[i].ID)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(wants[i], snapshotFiles(t, snap)); diff != "" {
			t.Fatalf("back to %q: files (-want +got):\n%s", steps[i].name, diff)
		}
	}
}

func TestSnapshotSizeLimit(t *testing.T) {
	g := newGoGitRepo(t, "main")
	g.commit(t, "big", map[string]string{"a.yml": strings.Repeat("x", 100)})
	plain := t.TempDir()
	writeFiles(t, plain, map[string]string{"a.yml": strings.Repeat("x", 100)})
	for _, repo := range []string{g.dir, plain} {
		src := open(t, Config{Repo: repo, MaxSnapshotBytes: 99})
		rev, err := src.Latest(context.Background())
		if err == nil {
			_, err = src.Checkout(context.Background(), rev)
		}
		if !errors.Is(err, ErrTooLarge) {
			t.Errorf("%s: error = %v, want ErrTooLarge", src.Describe(), err)
		}
	}
}

func TestLocalBareRepositorySeesPushesThatArriveAsPacks(t *testing.T) {
	requireGit(t)
	work := newGoGitRepo(t, "main")
	work.commit(t, "first", map[string]string{"specs/a.yml": "v1"})
	bare := newBareRemote(t, t.TempDir(), "specs", work.dir)
	gitCmd(t, bare, "gc", "-q") // a pack from the start: go-git caches its index
	src := open(t, Config{Repo: bare, Path: "specs", PollInterval: time.Hour})
	runSource(t, src)
	checkout(t, src, latest(t, src))

	// More objects than receive.unpackLimit (100): the push lands as a new
	// pack file instead of loose objects.
	files := map[string]string{}
	for i := range 150 {
		files[fmt.Sprintf("specs/many/s%03d.yml", i)] = fmt.Sprintf("n: %d\n", i)
	}
	sha := work.commit(t, "many", files)
	push(t, work.dir, bare, "main")
	if packs := gitCmd(t, bare, "count-objects", "-v"); !strings.Contains(packs, "packs: 2") {
		t.Fatalf("precondition: the push did not arrive as a second pack:\n%s", packs)
	}
	// Straight to the new commit by its SHA, before anything else reopened
	// the repository: the open one has a stale pack index.
	snap, err := src.CheckoutAt(context.Background(), sha)
	if err != nil {
		t.Fatalf("CheckoutAt(pushed sha): %v", err)
	}
	if got := len(snapshotFiles(t, snap)); got != 151 {
		t.Errorf("CheckoutAt snapshot has %d files, want 151", got)
	}
	if !waitNudge(src, 5*time.Second) {
		t.Fatal("no nudge for a push into the bare repository")
	}
	rev := latest(t, src)
	if rev.ID != sha {
		t.Fatalf("Latest().ID = %s, want %s", rev.ID, sha)
	}
	if got := len(checkout(t, src, rev)); got != 151 {
		t.Errorf("snapshot has %d files, want 151", got)
	}
}
