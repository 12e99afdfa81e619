package runner_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"hoist/agents/api"
	"hoist/agents/runner"
)

// codeArchive builds a code archive whose entries are given in order
// (links as "->target").
func codeArchive(t *testing.T, entries [][2]string) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	for _, e := range entries {
		h := &tar.Header{Name: e[0], Mode: 0o644, Size: int64(len(e[1])), Typeflag: tar.TypeReg}
		if len(e[1]) > 2 && e[1][:2] == "->" {
			h = &tar.Header{Name: e[0], Mode: 0o777, Typeflag: tar.TypeSymlink, Linkname: e[1][2:]}
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if h.Typeflag == tar.TypeReg {
			if _, err := tw.Write([]byte(e[1])); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestRunner_codePlacesRepoAndFilesAndSetsRepoDir(t *testing.T) {
	c, _, wd := newRunner(t)
	abs := filepath.Join(wd, "abs", "cfg.txt")
	job := api.JobSpec{
		Commands:   []string{`echo "$DSTACK_REPO_DIR $DSTACK_WORKING_DIR"`, "cat src/a.txt src/sub/b.txt data/x.txt", "cat " + abs},
		WorkingDir: filepath.Join(wd, "w"),
		Code:       &api.CodeSpec{Repo: "src", RepoIfExists: api.RepoIfExistsError, Files: []string{"data", abs}},
	}
	if err := c.Submit(ctx(t), job); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Run(ctx(t)); !isStatus(err, 409) {
		t.Fatalf("Run before the code upload = %v, want http 409", err)
	}
	archive := codeArchive(t, [][2]string{
		{"repo/a.txt", "A\n"}, {"repo/sub/b.txt", "B\n"}, {"files/0/x.txt", "X\n"}, {"files/1", "F\n"},
	})
	if err := c.UploadCode(ctx(t), bytes.NewReader(archive), ""); err != nil {
		t.Fatalf("UploadCode: %v", err)
	}
	if _, err := c.Run(ctx(t)); err != nil {
		t.Fatal(err)
	}
	if st, err := c.Wait(ctx(t)); err != nil || st.State != api.JobDone {
		t.Fatalf("Wait = %+v, %v; want done", st, err)
	}
	got, _ := stdout(t, c)
	want := filepath.Join(wd, "w", "src") + " " + filepath.Join(wd, "w") + "\nA\nB\nX\nF\n"
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("stdout (-want +got):\n%s", diff)
	}
}

func TestRunner_codeTildeIsTheJobsHome(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	c, _, wd := newRunner(t)
	job := api.JobSpec{Commands: []string{"cat ~/code/a.txt"}, WorkingDir: wd, Code: &api.CodeSpec{Repo: "~/code"}}
	if err := c.Submit(ctx(t), job); err != nil {
		t.Fatal(err)
	}
	if err := c.UploadCode(ctx(t), bytes.NewReader(codeArchive(t, [][2]string{{"repo/a.txt", "A\n"}})), ""); err != nil {
		t.Fatalf("UploadCode: %v", err)
	}
	if _, err := c.Run(ctx(t)); err != nil {
		t.Fatal(err)
	}
	if st, err := c.Wait(ctx(t)); err != nil || st.State != api.JobDone {
		t.Fatalf("Wait = %+v, %v; want done", st, err)
	}
	if got, _ := stdout(t, c); got != "A\n" {
		t.Errorf("stdout = %q, want the repository under $HOME/code", got)
	}
}

func TestRunner_codeIfExists(t *testing.T) {
	for _, tc := range []struct {
		ifExists string
		wantErr  bool
	}{{api.RepoIfExistsError, true}, {api.RepoIfExistsSkip, false}} {
		t.Run(tc.ifExists, func(t *testing.T) {
			c, _, wd := newRunner(t)
			repo := filepath.Join(wd, "repo")
			if err := os.MkdirAll(repo, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(repo, "old.txt"), []byte("old"), 0o644); err != nil {
				t.Fatal(err)
			}
			job := api.JobSpec{Commands: []string{"true"}, WorkingDir: wd, Code: &api.CodeSpec{Repo: repo, RepoIfExists: tc.ifExists}}
			if err := c.Submit(ctx(t), job); err != nil {
				t.Fatal(err)
			}
			err := c.UploadCode(ctx(t), bytes.NewReader(codeArchive(t, [][2]string{{"repo/new.txt", "new"}})), "")
			if (err != nil) != tc.wantErr {
				t.Fatalf("UploadCode = %v, want error %v", err, tc.wantErr)
			}
			if _, err := os.Stat(filepath.Join(repo, "new.txt")); err == nil {
				t.Errorf("the code was written into the existing repository directory")
			}
		})
	}
}

func TestRunner_codeRefusesEscapes(t *testing.T) {
	for name, entries := range map[string][][2]string{
		"dotdot":        {{"repo/../../escape.txt", "x"}},
		"absolute link": {{"repo/l", "->/etc"}},
		"escaping link": {{"repo/l", "->../../escape"}},
		"through link":  {{"repo/l", "->sub"}, {"repo/l/x", "x"}},
	} {
		t.Run(name, func(t *testing.T) {
			c, _, wd := newRunner(t)
			job := api.JobSpec{Commands: []string{"true"}, WorkingDir: filepath.Join(wd, "w"), Code: &api.CodeSpec{Repo: "r"}}
			if err := c.Submit(ctx(t), job); err != nil {
				t.Fatal(err)
			}
			if err := c.UploadCode(ctx(t), bytes.NewReader(codeArchive(t, entries)), ""); !isStatus(err, 400) {
				t.Fatalf("UploadCode = %v, want http 400", err)
			}
		})
	}
}

func TestRunner_codeCacheServesTheNextJobOfTheSameArchive(t *testing.T) {
	cache := t.TempDir()
	archive := codeArchive(t, [][2]string{{"repo/a.txt", "A\n"}})
	h := sha256.Sum256(archive)
	sum := hex.EncodeToString(h[:])
	submit := func() (*api.RunnerClient, string) {
		c, _, wd := newRunnerWith(t, runner.Config{Home: t.TempDir(), CodeCache: cache})
		if err := c.Submit(ctx(t), api.JobSpec{Commands: []string{"cat a.txt"}, WorkingDir: wd, Code: &api.CodeSpec{Repo: "."}}); err != nil {
			t.Fatal(err)
		}
		return c, wd
	}
	first, _ := submit()
	if ok, err := first.UseCachedCode(ctx(t), sum); ok || err != nil {
		t.Fatalf("UseCachedCode on an empty cache = %v, %v; want false, nil", ok, err)
	}
	if err := first.UploadCode(ctx(t), bytes.NewReader(archive), "00"+sum[2:]); !isStatus(err, 400) {
		t.Fatalf("UploadCode with a wrong sha256 = %v, want http 400", err)
	}
	if err := first.UploadCode(ctx(t), bytes.NewReader(archive), sum); err != nil {
		t.Fatalf("UploadCode: %v", err)
	}
	second, wd := submit()
	if ok, err := second.UseCachedCode(ctx(t), sum); !ok || err != nil {
		t.Fatalf("UseCachedCode after an upload = %v, %v; want true, nil", ok, err)
	}
	if b, err := os.ReadFile(filepath.Join(wd, "a.txt")); err != nil || string(b) != "A\n" {
		t.Fatalf("a.txt from the cache = %q, %v", b, err)
	}
	// A cache entry whose content is not what its name says is not used.
	if err := os.WriteFile(filepath.Join(cache, sum+".tar.gz"), codeArchive(t, [][2]string{{"repo/a.txt", "evil\n"}}), 0o644); err != nil {
		t.Fatal(err)
	}
	third, _ := submit()
	if ok, err := third.UseCachedCode(ctx(t), sum); ok || err != nil {
		t.Fatalf("UseCachedCode of a tampered entry = %v, %v; want false, nil", ok, err)
	}
}
