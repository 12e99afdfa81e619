package runner_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"hoist/agents/api"
	"hoist/agents/runner"
)

// code is a job's code as the server sends it: a manifest and its blobs.
type code struct {
	manifest api.CodeManifest
	blobs    map[string][]byte
}

// newCode builds code of the given files (path → content) in order, with a
// directory entry for "repo" first when a path is under it.
func newCode(files [][2]string) code {
	c := code{blobs: map[string][]byte{}}
	dirs := map[string]bool{}
	for _, f := range files {
		if d := filepath.Dir(f[0]); strings.HasPrefix(f[0], api.CodeRepoPrefix+"/") && !dirs[d] {
			for p := d; p != "." && !dirs[p]; p = filepath.Dir(p) {
				dirs[p] = true
			}
		}
	}
	for _, d := range sortedKeys(dirs) {
		c.manifest.Entries = append(c.manifest.Entries, api.CodeEntry{Path: d, Type: api.CodeEntryDir, Mode: 0o755})
	}
	for _, f := range files {
		h := sha256.Sum256([]byte(f[1]))
		sum := hex.EncodeToString(h[:])
		c.blobs[sum] = []byte(f[1])
		c.manifest.Entries = append(c.manifest.Entries, api.CodeEntry{Path: f[0], Type: api.CodeEntryFile, Mode: 0o644, Size: int64(len(f[1])), SHA256: sum})
	}
	return c
}

func sortedKeys(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out) // parents before their children
	return out
}

func (c code) open(sum string) (io.ReadCloser, error) {
	b, ok := c.blobs[sum]
	if !ok {
		return nil, fmt.Errorf("no blob %s", sum)
	}
	return io.NopCloser(bytes.NewReader(b)), nil
}

// send delivers c to the runner.
func (c code) send(t *testing.T, rc *api.RunnerClient) (api.CodeDelivery, error) {
	t.Helper()
	return rc.SendCode(ctx(t), c.manifest, c.open)
}

func TestRunner_codePlacesRepoAndFilesAndSetsRepoDir(t *testing.T) {
	c, _, wd := newRunner(t)
	abs := filepath.Join(wd, "abs", "cfg.txt")
	job := api.JobSpec{
		Commands:   []string{`echo "$DSTACK_REPO_DIR $DSTACK_WORKING_DIR"`, "cat src/a.txt src/sub/b.txt data/x.txt", "cat " + abs, "test -x src/run.sh"},
		WorkingDir: filepath.Join(wd, "w"),
		Code:       &api.CodeSpec{Repo: "src", RepoIfExists: api.RepoIfExistsError, Files: []string{"data", abs}},
	}
	if err := c.Submit(ctx(t), job); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Run(ctx(t)); !isStatus(err, 409) {
		t.Fatalf("Run before the code = %v, want http 409", err)
	}
	cd := newCode([][2]string{{"repo/a.txt", "A\n"}, {"repo/sub/b.txt", "B\n"}, {"files/0/x.txt", "X\n"}, {"files/1", "F\n"}, {"repo/run.sh", "#!/bin/sh\n"}})
	cd.manifest.Entries[len(cd.manifest.Entries)-1].Mode = 0o755
	if _, err := cd.send(t, c); err != nil {
		t.Fatalf("SendCode: %v", err)
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
	if _, err := newCode([][2]string{{"repo/a.txt", "A\n"}}).send(t, c); err != nil {
		t.Fatalf("SendCode: %v", err)
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
			_, err := newCode([][2]string{{"repo/new.txt", "new"}}).send(t, c)
			if (err != nil) != tc.wantErr {
				t.Fatalf("SendCode = %v, want error %v", err, tc.wantErr)
			}
			if _, err := os.Stat(filepath.Join(repo, "new.txt")); err == nil {
				t.Errorf("the code was written into the existing repository directory")
			}
		})
	}
}

func TestRunner_codeRefusesManifestsThatLeaveTheirPlace(t *testing.T) {
	for name, entry := range map[string]api.CodeEntry{
		"dotdot":          {Path: "repo/../../escape.txt", Type: api.CodeEntryDir, Mode: 0o755},
		"absolute":        {Path: "/etc/passwd", Type: api.CodeEntryDir, Mode: 0o755},
		"unknown part":    {Path: "elsewhere/x", Type: api.CodeEntryDir, Mode: 0o755},
		"no such mapping": {Path: "files/3", Type: api.CodeEntryDir, Mode: 0o755},
		"setuid":          {Path: "repo/x", Type: api.CodeEntryDir, Mode: 0o4755},
		"bad sha256":      {Path: "repo/x", Type: api.CodeEntryFile, Mode: 0o644, SHA256: "abc"},
		"symlink":         {Path: "repo/l", Type: "symlink", Mode: 0o777},
	} {
		t.Run(name, func(t *testing.T) {
			c, _, wd := newRunner(t)
			job := api.JobSpec{Commands: []string{"true"}, WorkingDir: filepath.Join(wd, "w"), Code: &api.CodeSpec{Repo: "r", Files: []string{"f"}}}
			if err := c.Submit(ctx(t), job); err != nil {
				t.Fatal(err)
			}
			if _, err := c.SendCodeManifest(ctx(t), api.CodeManifest{Entries: []api.CodeEntry{entry}}); !isStatus(err, 400) {
				t.Fatalf("SendCodeManifest = %v, want http 400", err)
			}
		})
	}
}

// TestRunner_codePlacedThroughALinkIsRefused: a directory of the
// destination that is a symbolic link (planted by an image or an earlier
// job) is not written through.
func TestRunner_codePlacedThroughALinkIsRefused(t *testing.T) {
	c, _, wd := newRunner(t)
	outside := t.TempDir()
	if err := os.MkdirAll(filepath.Join(wd, "d"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(wd, "d", "l")); err != nil {
		t.Fatal(err)
	}
	job := api.JobSpec{Commands: []string{"true"}, WorkingDir: wd, Code: &api.CodeSpec{Files: []string{"d"}}}
	if err := c.Submit(ctx(t), job); err != nil {
		t.Fatal(err)
	}
	if _, err := newCode([][2]string{{"files/0/l/x", "x"}}).send(t, c); !isStatus(err, 400) || !strings.Contains(err.Error(), "files/0/l/x") {
		t.Fatalf("SendCode through a link = %v, want http 400 naming files/0/l/x", err)
	}
	if _, err := os.Stat(filepath.Join(outside, "x")); err == nil {
		t.Fatal("the code was written through the link")
	}
}

// submitCached starts a runner on the shared cache and submits a job that
// prints its repository's a.txt and b.txt.
func submitCached(t *testing.T, cache string, limit int64) (*api.RunnerClient, string) {
	t.Helper()
	c, _, wd := newRunnerWith(t, runner.Config{Home: t.TempDir(), CodeCache: cache, CodeCacheBytes: limit})
	if err := c.Submit(ctx(t), api.JobSpec{Commands: []string{"cat a.txt"}, WorkingDir: wd, Code: &api.CodeSpec{Repo: "."}}); err != nil {
		t.Fatal(err)
	}
	return c, wd
}

func readFile(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestRunner_codeSecondDeliverySendsOnlyTheChangedBlob(t *testing.T) {
	cache := t.TempDir()
	first, _ := submitCached(t, cache, 0)
	v1 := newCode([][2]string{{"repo/a.txt", "A1\n"}, {"repo/lib/b.txt", "B\n"}, {"repo/lib/c.txt", "C\n"}})
	d, err := v1.send(t, first)
	if err != nil {
		t.Fatal(err)
	}
	if d.Blobs != 3 {
		t.Fatalf("first delivery sent %d blobs, want 3", d.Blobs)
	}
	second, wd := submitCached(t, cache, 0)
	v2 := newCode([][2]string{{"repo/a.txt", "A2\n"}, {"repo/lib/b.txt", "B\n"}, {"repo/lib/c.txt", "C\n"}})
	if d, err = v2.send(t, second); err != nil {
		t.Fatal(err)
	}
	if d.Blobs != 1 || d.Bytes != 3 {
		t.Fatalf("after a one-file change the delivery sent %d blobs of %d bytes, want 1 of 3", d.Blobs, d.Bytes)
	}
	for p, want := range map[string]string{"a.txt": "A2\n", "lib/b.txt": "B\n", "lib/c.txt": "C\n"} {
		if got := readFile(t, filepath.Join(wd, p)); got != want {
			t.Errorf("%s = %q, want %q", p, got, want)
		}
	}
	// A retried delivery places nothing again and sends nothing.
	if d, err = v2.send(t, second); err != nil || d.Blobs != 0 {
		t.Fatalf("repeated SendCode = %+v, %v; want nothing sent", d, err)
	}
}

func TestRunner_codeCorruptBlobsAreRefused(t *testing.T) {
	cache := t.TempDir()
	cd := newCode([][2]string{{"repo/a.txt", "A\n"}})
	sum := cd.manifest.Entries[len(cd.manifest.Entries)-1].SHA256

	// A blob sent with other content than its name says fails the
	// delivery, naming the file.
	c, _ := submitCached(t, cache, 0)
	bad := code{manifest: cd.manifest, blobs: map[string][]byte{sum: []byte("B\n")}}
	if _, err := bad.send(t, c); !isStatus(err, 400) || !strings.Contains(err.Error(), "repo/a.txt") {
		t.Fatalf("SendCode of a corrupt blob = %v, want http 400 naming repo/a.txt", err)
	}
	if _, err := c.Run(ctx(t)); !isStatus(err, 409) {
		t.Fatalf("Run without the code = %v, want http 409", err)
	}
	if _, err := os.Stat(filepath.Join(cache, sum)); err == nil {
		t.Fatal("the corrupt blob was stored")
	}

	// A cached blob whose content changed is not used: the runner asks
	// for it again.
	if _, err := cd.send(t, c); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(cache, sum), []byte("X\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	c2, wd := submitCached(t, cache, 0)
	d, err := cd.send(t, c2)
	if err != nil {
		t.Fatal(err)
	}
	if d.Blobs != 1 {
		t.Errorf("the tampered blob was not sent again (%d blobs sent)", d.Blobs)
	}
	if got := readFile(t, filepath.Join(wd, "a.txt")); got != "A\n" {
		t.Errorf("a.txt = %q, want the manifest's content", got)
	}
	if got := readFile(t, filepath.Join(cache, sum)); got != "A\n" {
		t.Errorf("the cache holds %q for the blob, want it repaired", got)
	}
}

func TestRunner_codeCacheEvictsTheLeastRecentlyUsedBlobs(t *testing.T) {
	cache := t.TempDir()
	big := func(b byte) string { return strings.Repeat(string(b), 1000) }
	deliver := func(files [][2]string) {
		c, _ := submitCached(t, cache, 2500)
		if _, err := newCode(files).send(t, c); err != nil {
			t.Fatal(err)
		}
	}
	sum := func(s string) string { h := sha256.Sum256([]byte(s)); return hex.EncodeToString(h[:]) }
	deliver([][2]string{{"repo/a.txt", big('a')}, {"repo/b.txt", big('b')}})
	deliver([][2]string{{"repo/c.txt", big('c')}, {"repo/d.txt", big('d')}})
	// Never a blob of the code just placed: c and d stay although together
	// with a or b they would exceed the limit.
	for s, want := range map[string]bool{big('a'): false, big('b'): false, big('c'): true, big('d'): true} {
		if _, err := os.Stat(filepath.Join(cache, sum(s))); (err == nil) != want {
			t.Errorf("blob of %c present = %v, want %v", s[0], err == nil, want)
		}
	}
}

func TestRunner_codeConcurrentDeliveriesShareTheCache(t *testing.T) {
	cache := t.TempDir()
	shared := [][2]string{{"repo/common.txt", strings.Repeat("shared ", 10000)}}
	const n = 6
	var wg sync.WaitGroup
	errs := make([]error, n)
	wds := make([]string, n)
	clients := make([]*api.RunnerClient, n)
	for i := range n {
		clients[i], wds[i] = submitCached(t, cache, 0)
	}
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			files := append([][2]string{{"repo/a.txt", fmt.Sprintf("job %d\n", i)}}, shared...)
			_, errs[i] = clients[i].SendCode(t.Context(), newCode(files).manifest, newCode(files).open)
		}()
	}
	wg.Wait()
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("delivery %d: %v", i, errs[i])
		}
		if got, want := readFile(t, filepath.Join(wds[i], "a.txt")), fmt.Sprintf("job %d\n", i); got != want {
			t.Errorf("job %d placed a.txt %q, want %q", i, got, want)
		}
		if got := readFile(t, filepath.Join(wds[i], "common.txt")); got != shared[0][1] {
			t.Errorf("job %d placed a common.txt of %d bytes", i, len(got))
		}
	}
	ents, _ := os.ReadDir(cache)
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), ".") {
			t.Errorf("a temporary file stayed in the cache: %s", e.Name())
		}
	}
	if len(ents) != n+1 {
		t.Errorf("the cache holds %d blobs, want %d", len(ents), n+1)
	}
}

// TestRunner_codeWithoutACacheSendsEverythingAndKeepsNothing: a runner
// without an instance cache (a Kubernetes pod) receives every blob and
// removes them once placed.
func TestRunner_codeWithoutACacheSendsEverythingAndKeepsNothing(t *testing.T) {
	home := t.TempDir()
	c, _, wd := newRunnerWith(t, runner.Config{Home: home})
	if err := c.Submit(ctx(t), api.JobSpec{Commands: []string{"true"}, WorkingDir: wd, Code: &api.CodeSpec{Repo: "."}}); err != nil {
		t.Fatal(err)
	}
	d, err := newCode([][2]string{{"repo/a.txt", "A\n"}, {"repo/b.txt", "A\n"}}).send(t, c)
	if err != nil || d.Blobs != 1 {
		t.Fatalf("SendCode = %+v, %v; want the one distinct blob sent", d, err)
	}
	if got := readFile(t, filepath.Join(wd, "b.txt")); got != "A\n" {
		t.Errorf("b.txt = %q", got)
	}
	if _, err := os.Stat(filepath.Join(home, "code-blobs")); err == nil {
		t.Error("the job's blobs stayed after placing")
	}
}

// blobsBody is a SendCodeBlobs body of the given entries.
func blobsBody(t *testing.T, entries map[string][]byte) io.Reader {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	for name, b := range entries {
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(b)), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write(b); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return &buf
}

func TestRunner_codeBlobsOutsideTheManifestAreRefused(t *testing.T) {
	c, _ := submitCached(t, t.TempDir(), 0)
	cd := newCode([][2]string{{"repo/a.txt", "A\n"}})
	if _, err := c.SendCodeBlobs(ctx(t), blobsBody(t, map[string][]byte{"x": []byte("x")})); !isStatus(err, 409) {
		t.Fatalf("blobs before the manifest = %v, want http 409", err)
	}
	st, err := c.SendCodeManifest(ctx(t), cd.manifest)
	if err != nil || len(st.Missing) != 1 {
		t.Fatalf("SendCodeManifest = %+v, %v; want one missing blob", st, err)
	}
	if _, err := c.SendCodeBlobs(ctx(t), blobsBody(t, map[string][]byte{"../../etc/passwd": []byte("x")})); !isStatus(err, 400) {
		t.Fatalf("a blob not of the manifest = %v, want http 400", err)
	}
}
