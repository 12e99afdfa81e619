package runner_test

import (
	"archive/tar"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"hoist/agents/api"
)

// artifactTree makes the working dir the artifact tests ask about:
//
//	out/top.txt, out/a/b/deep.txt, out/a/empty/, out/link → top.txt,
//	empty/, linkdir → out, a,b c.txt
func artifactTree(t *testing.T, wd string) {
	t.Helper()
	for _, d := range []string{"out/a/b", "out/a/empty", "empty"} {
		if err := os.MkdirAll(filepath.Join(wd, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	files := map[string]string{"out/top.txt": "top\n", "out/a/b/deep.txt": "deep\n", "a,b c.txt": "odd\n"}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(wd, name), []byte(body), 0o640); err != nil {
			t.Fatal(err)
		}
	}
	for link, target := range map[string]string{"out/link": "top.txt", "linkdir": "out"} {
		if err := os.Symlink(target, filepath.Join(wd, link)); err != nil {
			t.Fatal(err)
		}
	}
}

// readArtifacts reads an artifacts tar into "name" (directories: "name/")
// → content, in the archive's order.
func readArtifacts(t *testing.T, body io.Reader) ([]string, map[string]string) {
	t.Helper()
	var names []string
	content := map[string]string{}
	tr := tar.NewReader(body)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return names, content
		}
		if err != nil {
			t.Fatalf("read tar: %v", err)
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatalf("read %s: %v", h.Name, err)
		}
		names = append(names, h.Name)
		content[h.Name] = string(b)
	}
}

func TestRunner_artifactsArchiveThePathsAskedFor(t *testing.T) {
	tests := []struct {
		name    string
		paths   func(wd string) []string
		entries func(wd string) []string
		missing func(wd string) []string
	}{
		{
			name:  "nested directories are walked, empty ones kept, symlinks skipped",
			paths: func(string) []string { return []string{"out"} },
			entries: func(string) []string {
				return []string{"out/", "out/a/", "out/a/b/", "out/a/b/deep.txt", "out/a/empty/", "out/top.txt"}
			},
		},
		{
			name:    "a file alone",
			paths:   func(string) []string { return []string{"out/top.txt"} },
			entries: func(string) []string { return []string{"out/top.txt"} },
		},
		{
			name:    "an empty directory is a directory entry",
			paths:   func(string) []string { return []string{"empty"} },
			entries: func(string) []string { return []string{"empty/"} },
		},
		{
			name:    "a missing path is reported and the rest archived",
			paths:   func(string) []string { return []string{"nope", "out/top.txt", "gone/deeper"} },
			entries: func(string) []string { return []string{"out/top.txt"} },
			missing: func(string) []string { return []string{"nope", "gone/deeper"} },
		},
		{
			name:    "a name with a comma and a space survives the missing header",
			paths:   func(string) []string { return []string{"x,y z", "a,b c.txt"} },
			entries: func(string) []string { return []string{"a,b c.txt"} },
			missing: func(string) []string { return []string{"x,y z"} },
		},
		{
			name:    "a symlink asked for is not followed and is reported",
			paths:   func(string) []string { return []string{"out/link", "linkdir", "linkdir/top.txt"} },
			missing: func(string) []string { return []string{"out/link", "linkdir", "linkdir/top.txt"} },
		},
		{
			name:  "an absolute path is named relative to the root",
			paths: func(wd string) []string { return []string{filepath.Join(wd, "out/a/b")} },
			entries: func(wd string) []string {
				r := strings.TrimPrefix(wd, "/")
				return []string{r + "/out/a/b/", r + "/out/a/b/deep.txt"}
			},
		},
		{
			name:    "overlapping paths give every entry once",
			paths:   func(string) []string { return []string{"out/a/b/deep.txt", "out/a/b", "./out/a/../a/b"} },
			entries: func(string) []string { return []string{"out/a/b/deep.txt", "out/a/b/"} },
		},
		{
			name:  "the working dir itself is its contents",
			paths: func(string) []string { return []string{"."} },
			entries: func(string) []string {
				return []string{"a,b c.txt", "empty/", "out/", "out/a/", "out/a/b/", "out/a/b/deep.txt", "out/a/empty/", "out/top.txt"}
			},
		},
		{
			name:  "no paths, an empty archive",
			paths: func(string) []string { return nil },
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, _, wd := newRunner(t)
			artifactTree(t, wd)
			if st := run(t, c, api.JobSpec{Commands: []string{"true"}, WorkingDir: wd}); st.State != api.JobDone {
				t.Fatalf("job = %+v, want done", st)
			}
			body, missing, err := c.Artifacts(ctx(t), tt.paths(wd))
			if err != nil {
				t.Fatalf("Artifacts: %v", err)
			}
			defer body.Close()
			names, _ := readArtifacts(t, body)
			var want, wantMissing []string
			if tt.entries != nil {
				want = tt.entries(wd)
			}
			if tt.missing != nil {
				wantMissing = tt.missing(wd)
			}
			if d := cmp.Diff(want, names); d != "" {
				t.Errorf("entries (-want +got):\n%s", d)
			}
			if d := cmp.Diff(wantMissing, missing); d != "" {
				t.Errorf("missing (-want +got):\n%s", d)
			}
		})
	}
}

func TestRunner_artifactsKeepContentModeAndTime(t *testing.T) {
	c, _, wd := newRunner(t)
	artifactTree(t, wd)
	mtime := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	if err := os.Chtimes(filepath.Join(wd, "out/top.txt"), mtime, mtime); err != nil {
		t.Fatal(err)
	}
	run(t, c, api.JobSpec{Commands: []string{"echo made > out/made.txt"}, WorkingDir: wd})
	body, _, err := c.Artifacts(ctx(t), []string{"out"})
	if err != nil {
		t.Fatal(err)
	}
	defer body.Close()
	got := map[string]string{}
	err = api.EachArtifact(body, func(name string, size int64, mode fs.FileMode, r io.Reader) error {
		b, err := io.ReadAll(r)
		got[name] = fmt.Sprintf("%s %d %v", b, size, mode)
		return err
	})
	if err != nil {
		t.Fatalf("EachArtifact: %v", err)
	}
	want := map[string]string{
		"out/top.txt":      "top\n 4 -rw-r-----",
		"out/a/b/deep.txt": "deep\n 5 -rw-r-----",
		"out/made.txt":     "made\n 5 " + fileMode(t, filepath.Join(wd, "out/made.txt")),
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("files (-want +got):\n%s", d)
	}
	body2, _, err := c.Artifacts(ctx(t), []string{"out/top.txt"})
	if err != nil {
		t.Fatal(err)
	}
	defer body2.Close()
	h, err := tar.NewReader(body2).Next()
	if err != nil || !h.ModTime.Equal(mtime) {
		t.Errorf("out/top.txt header = %+v, %v; want mtime %s", h, err, mtime)
	}
}

func fileMode(t *testing.T, p string) string {
	t.Helper()
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Mode().String()
}

func TestRunner_artifactsRefuseDotDotAndWantAJob(t *testing.T) {
	c, _, wd := newRunner(t)
	_, _, err := c.Artifacts(ctx(t), []string{"out"})
	if !errors.Is(err, api.ErrConflict) {
		t.Errorf("before submit: err = %v, want a conflict", err)
	}
	if err := c.Submit(ctx(t), api.JobSpec{Commands: []string{"true"}, WorkingDir: wd}); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"..", "../x", "out/../../x", "", "a\x00b"} {
		_, _, err := c.Artifacts(ctx(t), []string{"out", p})
		var ae *api.Error
		if !errors.As(err, &ae) || ae.Status != http.StatusBadRequest {
			t.Errorf("path %q: err = %v, want 400", p, err)
		}
	}
	// A submitted job that has not run is answered (nothing is there).
	body, missing, err := c.Artifacts(ctx(t), []string{"out"})
	if err != nil || len(missing) != 1 {
		t.Fatalf("pending job: missing %q, err %v; want out missing", missing, err)
	}
	body.Close()
}

func TestRunner_artifactsWhileTheJobRuns(t *testing.T) {
	c, _, wd := newRunner(t)
	artifactTree(t, wd)
	if err := c.Submit(ctx(t), api.JobSpec{Commands: []string{"exec sleep 60"}, WorkingDir: wd}); err != nil {
		t.Fatal(err)
	}
	if st, err := c.Run(ctx(t)); err != nil || st.State.State != api.JobRunning {
		t.Fatalf("Run = %+v, %v; want running", st, err)
	}
	body, _, err := c.Artifacts(ctx(t), []string{"out/top.txt"})
	if err != nil {
		t.Fatalf("Artifacts while running: %v", err)
	}
	defer body.Close()
	if names, _ := readArtifacts(t, body); len(names) != 1 {
		t.Errorf("entries = %q, want out/top.txt", names)
	}
}

func TestRunner_artifactsStreamALargeFile(t *testing.T) {
	const size = 256 << 20
	c, _, wd := newRunner(t)
	// A sparse file with data at both ends: reading it costs no disk.
	f, err := os.Create(filepath.Join(wd, "big.bin"))
	if err != nil {
		t.Fatal(err)
	}
	head, tail := []byte("head"), []byte("tail")
	_, err1 := f.Write(head)
	_, err2 := f.WriteAt(tail, size-int64(len(tail)))
	if err := errors.Join(err1, err2, f.Close()); err != nil {
		t.Fatal(err)
	}
	want := sha256.New()
	if f, err = os.Open(f.Name()); err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(want, f); err != nil {
		t.Fatal(err)
	}
	f.Close()
	run(t, c, api.JobSpec{Commands: []string{"true"}, WorkingDir: wd})
	start := time.Now()
	body, _, err := c.Artifacts(ctx(t), []string{"big.bin"})
	if err != nil {
		t.Fatal(err)
	}
	defer body.Close()
	got := sha256.New()
	var n int64
	err = api.EachArtifact(body, func(name string, size int64, _ fs.FileMode, r io.Reader) error {
		var err error
		n, err = io.Copy(got, r)
		return err
	})
	if err != nil {
		t.Fatalf("EachArtifact: %v", err)
	}
	elapsed := time.Since(start)
	if n != size || !cmp.Equal(got.Sum(nil), want.Sum(nil)) {
		t.Errorf("streamed %d bytes, sha256 %x; want %d bytes, %x", n, got.Sum(nil), size, want.Sum(nil))
	}
	t.Logf("streamed %d MiB in %s (%.0f MiB/s)", size>>20, elapsed.Round(time.Millisecond), float64(size>>20)/elapsed.Seconds())
}

// TestRunner_artifactsCutTheStreamOnAFileThatShrinks: sysfs reports 4096
// bytes for files that hold a few, like a file cut while it is read; the
// runner must not send a complete-looking tar then.
func TestRunner_artifactsCutTheStreamOnAFileThatShrinks(t *testing.T) {
	const sysfsFile = "/sys/devices/system/cpu/online"
	if fi, err := os.Stat(sysfsFile); err != nil || fi.Size() <= 64 {
		if os.Getenv("CI") == "true" {
			t.Fatalf("this test needs sysfs's %s reporting more bytes than it holds: %v", sysfsFile, err)
		}
		t.Skipf("this test needs sysfs's %s reporting more bytes than it holds: %v", sysfsFile, err)
	}
	c, _, wd := newRunner(t)
	artifactTree(t, wd)
	run(t, c, api.JobSpec{Commands: []string{"true"}, WorkingDir: wd})
	body, _, err := c.Artifacts(ctx(t), []string{"out/top.txt", sysfsFile})
	if err != nil {
		t.Fatal(err)
	}
	defer body.Close()
	var names []string
	err = api.EachArtifact(body, func(name string, _ int64, _ fs.FileMode, r io.Reader) error {
		names = append(names, name)
		return nil
	})
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("EachArtifact after %q: err = %v, want io.ErrUnexpectedEOF", names, err)
	}
}
