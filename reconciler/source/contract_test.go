package source

import (
	"context"
	"testing"
	"testing/fstest"
	"time"
)

// TestEveryKindKeepsTheContract runs the same behaviour checks against a
// local repository, a remote over HTTP and a plain directory.
func TestEveryKindKeepsTheContract(t *testing.T) {
	requireGit(t)
	kinds := []struct {
		name  string
		setup func(t *testing.T) (cfg Config, change func(content string))
	}{
		{"local git", func(t *testing.T) (Config, func(string)) {
			g := newGoGitRepo(t, "main")
			g.commit(t, "v1", map[string]string{"specs/a.yml": "v1", "specs/d/b.yml": "b"})
			return Config{Repo: g.dir, Path: "specs"}, func(c string) {
				g.commit(t, c, map[string]string{"specs/a.yml": c})
			}
		}},
		{"remote git", func(t *testing.T) (Config, func(string)) {
			f := newRemoteFixture(t, nil)
			f.commitAndPush(t, "b", map[string]string{"specs/d/b.yml": "b"})
			return Config{Repo: f.url, Path: "specs"}, func(c string) {
				f.commitAndPush(t, c, map[string]string{"specs/a.yml": c})
			}
		}},
		{"plain directory", func(t *testing.T) (Config, func(string)) {
			dir := t.TempDir()
			writeFiles(t, dir, map[string]string{"specs/a.yml": "v1", "specs/d/b.yml": "b"})
			return Config{Repo: dir, Path: "specs"}, func(c string) {
				writeFiles(t, dir, map[string]string{"specs/a.yml": c})
			}
		}},
	}
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			cfg, change := k.setup(t)
			src := open(t, cfg)
			ctx := context.Background()

			rev1 := latest(t, src)
			if again := latest(t, src); again != rev1 {
				t.Errorf("Latest() without a change: %+v, then %+v", rev1, again)
			}
			change("v2")
			rev2 := latest(t, src)
			if rev2.ID == rev1.ID {
				t.Fatal("Latest() did not move after a change")
			}
			if rev2.Time.IsZero() {
				t.Errorf("Latest().Time is zero: %+v", rev2)
			}
			for _, c := range []struct {
				rev  Revision
				want string
			}{{rev1, "v1"}, {rev2, "v2"}} {
				snap, err := src.Checkout(ctx, c.rev)
				if err != nil {
					t.Fatalf("Checkout(%s): %v", c.rev.ID, err)
				}
				if snap.Revision.ID != c.rev.ID || snap.Revision.Branch != c.rev.Branch {
					t.Errorf("Checkout(%s).Revision = %+v", c.rev.ID, snap.Revision)
				}
				if err := fstest.TestFS(snap.FS, "a.yml", "d/b.yml"); err != nil {
					t.Errorf("Checkout(%s): %v", c.rev.ID, err)
				}
				if got := snapshotFiles(t, snap)["a.yml"]; got != c.want {
					t.Errorf("Checkout(%s) a.yml = %q, want %q", c.rev.ID, got, c.want)
				}
				if err := snap.Close(); err != nil {
					t.Errorf("Close: %v", err)
				}
				at, err := src.CheckoutAt(ctx, c.rev.ID)
				if err != nil {
					t.Fatalf("CheckoutAt(%s): %v", c.rev.ID, err)
				}
				if got := snapshotFiles(t, at)["a.yml"]; got != c.want || at.Revision.ID != c.rev.ID {
					t.Errorf("CheckoutAt(%s) = %s with a.yml %q, want %q", c.rev.ID, at.Revision.ID, got, c.want)
				}
			}
			src.Trigger()
			if !waitNudge(src, time.Second) {
				t.Error("Trigger did not nudge")
			}
		})
	}
}
