package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"hoist/store"
	"hoist/store/blob"
	"hoist/web"
)

// putArtifact stores one artifact file of the fixture's run.
func (f *cliFixture) putArtifact(t *testing.T, run string, job int, path, body string) {
	t.Helper()
	key := blob.Key(store.DefaultProject, f.runIDs[run], job, path)
	if err := f.blobs.Put(t.Context(), key, strings.NewReader(body), int64(len(body))); err != nil {
		t.Fatal(err)
	}
}

// tree returns every file under dir as "path=content", sorted.
func tree(t *testing.T, dir string) []string {
	t.Helper()
	out := []string{}
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		out = append(out, filepath.ToSlash(rel)+"="+string(b))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(out)
	return out
}

func TestArtifactsGet_writesTheFilesUnderDirKeepingTheirPaths(t *testing.T) {
	isolateClientEnv(t)
	f := newCLIFixture(t)
	f.putArtifact(t, "hello", 0, "out/model.bin", "weights")
	f.putArtifact(t, "hello", 0, "out/sub/notes.md", "# notes")
	f.putArtifact(t, "hello", 0, "report.txt", "loss=0.1")
	for name, tc := range map[string]struct {
		args []string
		want []string
	}{
		"every file":  {nil, []string{"out/model.bin=weights", "out/sub/notes.md=# notes", "report.txt=loss=0.1"}},
		"a folder":    {[]string{"out"}, []string{"out/model.bin=weights", "out/sub/notes.md=# notes"}},
		"a folder/":   {[]string{"./out/sub/"}, []string{"out/sub/notes.md=# notes"}},
		"one file":    {[]string{"report.txt"}, []string{"report.txt=loss=0.1"}},
		"job 0 alone": {[]string{"--job", "0", "report.txt"}, []string{"report.txt=loss=0.1"}},
	} {
		t.Run(name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "new", "dir")
			var out syncBuffer
			args := append([]string{"artifacts", "get", "hello", "-o", dir}, tc.args...)
			if stderr, code := f.runCLI(t.Context(), &out, args...); code != 0 {
				t.Fatalf("exit %d: %s", code, stderr)
			}
			if got := tree(t, dir); !slices.Equal(got, tc.want) {
				t.Fatalf("wrote %v, want %v (no temporary file left)", got, tc.want)
			}
		})
	}
	// A second download replaces the files.
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "report.txt"), []byte("stale"), 0o600); err != nil {
		t.Fatal(err)
	}
	var out syncBuffer
	if stderr, code := f.runCLI(t.Context(), &out, "artifacts", "get", "hello", "report.txt", "-o", dir); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if got := tree(t, dir); !slices.Equal(got, []string{"report.txt=loss=0.1"}) {
		t.Errorf("after a second download: %v", got)
	}
}

func TestArtifactsGet_twoJobsSharingAPathNeedJob(t *testing.T) {
	isolateClientEnv(t)
	f := newCLIFixture(t)
	f.putArtifact(t, "hello", 0, "out/model.bin", "node 0")
	f.putArtifact(t, "hello", 1, "out/model.bin", "node 1")
	f.putArtifact(t, "hello", 1, "only-1.txt", "one")
	dir := t.TempDir()
	var out syncBuffer
	stderr, code := f.runCLI(t.Context(), &out, "artifacts", "get", "hello", "-o", dir)
	if code != 1 || !strings.Contains(stderr, "jobs 0 and 1 both have out/model.bin: pick one with --job") {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if got := tree(t, dir); len(got) != 0 {
		t.Fatalf("a refused download wrote %v", got)
	}
	if stderr, code := f.runCLI(t.Context(), &out, "artifacts", "get", "hello", "--job", "1", "-o", dir); code != 0 {
		t.Fatalf("--job 1: exit %d: %s", code, stderr)
	}
	if got := tree(t, dir); !slices.Equal(got, []string{"only-1.txt=one", "out/model.bin=node 1"}) {
		t.Fatalf("--job 1 wrote %v", got)
	}
}

func TestArtifactsGet_refusesWhatItCannotFetch(t *testing.T) {
	isolateClientEnv(t)
	f := newCLIFixture(t)
	f.putArtifact(t, "hello", 0, "report.txt", "loss=0.1")
	for name, tc := range map[string]struct {
		args []string
		code int
		want string
	}{
		"unknown run":      {[]string{"nope"}, 3, "404"},
		"no artifacts":     {[]string{"train"}, 1, "run train has no artifacts"},
		"nothing at PATH":  {[]string{"hello", "out"}, 1, "run hello has no artifact at out"},
		"PATH leaving":     {[]string{"hello", "../report.txt"}, 1, `invalid PATH "../report.txt"`},
		"PATH absolute":    {[]string{"hello", "/etc"}, 1, `invalid PATH "/etc"`},
		"negative job":     {[]string{"hello", "--job", "-1"}, 1, "invalid --job -1"},
		"job without file": {[]string{"hello", "--job", "2"}, 1, "run hello has no artifacts"},
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			var out syncBuffer
			stderr, code := f.runCLI(t.Context(), &out, append(append([]string{"artifacts", "get"}, tc.args...), "-o", dir)...)
			if code != tc.code || !strings.Contains(stderr, tc.want) {
				t.Fatalf("exit %d, want %d with %q: %s", code, tc.code, tc.want, stderr)
			}
		})
	}
}

func TestArtifactsGet_neverWritesThroughALinkOutOfDir(t *testing.T) {
	isolateClientEnv(t)
	f := newCLIFixture(t)
	f.putArtifact(t, "hello", 0, "out/model.bin", "weights")
	dir, elsewhere := t.TempDir(), t.TempDir()
	if err := os.Symlink(elsewhere, filepath.Join(dir, "out")); err != nil {
		t.Fatal(err)
	}
	var out syncBuffer
	if stderr, code := f.runCLI(t.Context(), &out, "artifacts", "get", "hello", "-o", dir); code != 1 || !strings.Contains(stderr, "out/model.bin") {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if got := tree(t, elsewhere); len(got) != 0 {
		t.Fatalf("wrote outside the directory: %v", got)
	}
}

func TestPickArtifacts_refusesUnsafePathsAServerLists(t *testing.T) {
	for _, p := range []string{"../x", "/etc/passwd", "a/../../x", "a//b", `a\..\x`} {
		_, err := pickArtifacts("r", []web.Artifact{{Path: p}}, "")
		if err == nil || !strings.Contains(err.Error(), "unsafe path") {
			t.Errorf("path %q: %v, want an unsafe path error", p, err)
		}
	}
}

func TestArtifactsList_printsATableOrJSON(t *testing.T) {
	isolateClientEnv(t)
	f := newCLIFixture(t)
	f.putArtifact(t, "hello", 0, "report.txt", "loss=0.1")
	f.putArtifact(t, "hello", 1, "out/model.bin", "weights")
	var out syncBuffer
	if stderr, code := f.runCLI(t.Context(), &out, "artifacts", "list", "hello"); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 3 || strings.Join(strings.Fields(lines[0]), " ") != "JOB PATH SIZE STORED" ||
		!strings.HasPrefix(strings.Join(strings.Fields(lines[1]), " "), "0 report.txt 8 ") ||
		!strings.HasPrefix(strings.Join(strings.Fields(lines[2]), " "), "1 out/model.bin 7 ") {
		t.Fatalf("table:\n%s", out.String())
	}
	out = syncBuffer{}
	if stderr, code := f.runCLI(t.Context(), &out, "artifacts", "list", "hello", "--job", "1", "-o", "json"); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if got := out.String(); !strings.Contains(got, `"path": "out/model.bin"`) || strings.Contains(got, "report.txt") {
		t.Fatalf("json: %s", got)
	}
	out = syncBuffer{}
	if _, code := f.runCLI(t.Context(), &out, "artifacts", "list", "train", "-o", "json"); code != 0 || strings.TrimSpace(out.String()) != "[]" {
		t.Fatalf("a run without artifacts: exit %d, %q", code, out.String())
	}
}

func TestArtifactsConfig_checksEveryField(t *testing.T) {
	dir := t.TempDir()
	for name, tc := range map[string]struct{ yaml, want string }{
		"unknown store":        {"artifacts:\n  store: gcs\n", `artifacts.store: must be fs or s3, not "gcs"`},
		"unknown field":        {"artifacts:\n  stor: fs\n", "stor"},
		"unknown s3 field":     {"artifacts:\n  store: s3\n  s3:\n    bucket: b\n    buckett: c\n", "buckett"},
		"s3 without bucket":    {"artifacts:\n  store: s3\n  s3:\n    region: r\n", "artifacts.s3.bucket: required"},
		"s3 with a path":       {"artifacts:\n  store: s3\n  path: /x\n  s3:\n    bucket: b\n", "artifacts.path: only with store: fs"},
		"s3 section for fs":    {"artifacts:\n  s3:\n    bucket: b\n", "artifacts.s3: only with store: s3"},
		"half the credentials": {"artifacts:\n  store: s3\n  s3:\n    bucket: b\n    access_key_id: k\n", "go together"},
		"bad retention":        {"artifacts:\n  retention: 30 days\n", `artifacts.retention: "30 days" is neither`},
		"negative retention":   {"artifacts:\n  retention: -1h\n", "artifacts.retention: \"-1h\" is negative"},
	} {
		t.Run(name, func(t *testing.T) {
			p := filepath.Join(dir, strings.ReplaceAll(name, " ", "-")+".yml")
			if err := os.WriteFile(p, []byte(tc.yaml), 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := loadServerConfig(p)
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), p) {
				t.Fatalf("loadServerConfig = %v, want an error naming the file and %q", err, tc.want)
			}
		})
	}
}

func TestOpenArtifacts_opensTheConfiguredStore(t *testing.T) {
	dataDir, own := t.TempDir(), filepath.Join(t.TempDir(), "arts")
	for name, tc := range map[string]struct {
		cfg       artifactsConfig
		dir       string
		retention time.Duration
	}{
		"default":            {artifactsConfig{}, filepath.Join(dataDir, "artifacts"), 0},
		"a directory":        {artifactsConfig{Store: "fs", Path: own, Retention: "30d"}, own, 30 * 24 * time.Hour},
		"a Go duration":      {artifactsConfig{Retention: "36h"}, filepath.Join(dataDir, "artifacts"), 36 * time.Hour},
		"zero keeps forever": {artifactsConfig{Retention: "0d"}, filepath.Join(dataDir, "artifacts"), 0},
	} {
		t.Run(name, func(t *testing.T) {
			if err := tc.cfg.check(); err != nil {
				t.Fatal(err)
			}
			st, retention, err := openArtifacts(t.Context(), tc.cfg, dataDir)
			if err != nil || retention != tc.retention {
				t.Fatalf("openArtifacts = %v, %v; want retention %v", retention, err, tc.retention)
			}
			if err := st.Put(t.Context(), "artifacts/main/r/0/f.txt", strings.NewReader("x"), 1); err != nil {
				t.Fatal(err)
			}
			if _, err := os.Stat(filepath.Join(tc.dir, "artifacts", "main", "r", "0", "f.txt")); err != nil {
				t.Fatalf("the file is not under %s: %v", tc.dir, err)
			}
		})
	}
	// An S3 store that does not answer stops the server, naming it.
	s3 := artifactsConfig{Store: "s3", S3: &blob.S3Config{Endpoint: "http://127.0.0.1:1", Region: "us-east-1", Bucket: "b",
		AccessKeyID: "a", SecretAccessKey: "s", PathStyle: true}}
	if _, _, err := openArtifacts(t.Context(), s3, dataDir); err == nil || !strings.Contains(err.Error(), "artifacts.s3: ") ||
		!strings.Contains(err.Error(), "127.0.0.1:1") {
		t.Fatalf("s3: %v", err)
	}
}
