package web_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"hoist/store"
	"hoist/store/blob"
	"hoist/web"
	"hoist/web/internal/fixture"
	"hoist/web/storeview"
)

// artifactEnv is a real web server over a real SQLite store (the fixture)
// whose run hello has artifact files in a blob.FS.
type artifactEnv struct {
	url    string
	seeded fixture.Seeded
	// put stores another file of run hello.
	put func(t *testing.T, job int, path, body string)
}

// helloArtifacts are the files of run hello: job 0's two and job 1's one.
var helloArtifacts = []struct {
	job        int
	path, body string
}{
	{0, "out/model.bin", "weights"},
	{0, "report 1.txt", "loss=0.1\n"},
	{1, "out/model.bin", "other weights"},
}

func newArtifactEnv(t *testing.T, withArtifacts bool) *artifactEnv {
	t.Helper()
	ctx := context.Background()
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "hoist.db"), store.Options{SecretKey: []byte("artifact-test-secret-key-32bytes")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	seeded, err := fixture.Seed(ctx, st, time.Now().UTC())
	if err != nil {
		t.Fatal(err)
	}
	blobs, err := blob.OpenFS(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	hello, err := st.GetRunByName(ctx, store.DefaultProject, "hello")
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range helloArtifacts {
		if err := blobs.Put(ctx, blob.Key(store.DefaultProject, hello.ID, a.job, a.path), strings.NewReader(a.body), int64(len(a.body))); err != nil {
			t.Fatal(err)
		}
	}
	// The replaced run of the same name has files too, never shown.
	old, err := st.ListRuns(ctx, store.RunFilter{Project: store.DefaultProject, Name: "hello", IncludeDeleted: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range old {
		if r.ID != hello.ID {
			if err := blobs.Put(ctx, blob.Key(store.DefaultProject, r.ID, 0, "stale.txt"), strings.NewReader("old"), 3); err != nil {
				t.Fatal(err)
			}
		}
	}
	view := storeview.New(st, "")
	deps := web.Deps{Store: view, Syncer: noopSyncer{view}, Tokens: view, Inventory: view}
	if withArtifacts {
		deps.Artifacts = storeview.NewArtifacts(st, "", blobs)
	}
	srv, err := web.New(web.Config{AdminToken: "bootstrap-admin"}, deps)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(func() {
		srv.Close()
		ts.Close()
	})
	put := func(t *testing.T, job int, path, body string) {
		t.Helper()
		if err := blobs.Put(ctx, blob.Key(store.DefaultProject, hello.ID, job, path), strings.NewReader(body), int64(len(body))); err != nil {
			t.Fatal(err)
		}
	}
	return &artifactEnv{url: ts.URL, seeded: seeded, put: put}
}

// fetch sends GET path with the token (none when empty).
func (e *artifactEnv) fetch(t *testing.T, path, tok string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, e.url+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, string(b)
}

func TestArtifactsAPI_listsTheRunsFilesByJob(t *testing.T) {
	e := newArtifactEnv(t, true)
	for name, tc := range map[string]struct {
		query string
		want  []string // job/path
	}{
		"every job": {"", []string{"0/out/model.bin", "0/report 1.txt", "1/out/model.bin"}},
		"one job":   {"?job=1", []string{"1/out/model.bin"}},
		"no files":  {"?job=7", []string{}},
	} {
		t.Run(name, func(t *testing.T) {
			resp, body := e.fetch(t, "/api/v1/runs/hello/artifacts"+tc.query, e.seeded.Tokens.Viewer)
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("status %d: %s", resp.StatusCode, body)
			}
			var arts []web.Artifact
			if err := json.Unmarshal([]byte(body), &arts); err != nil {
				t.Fatal(err)
			}
			got := []string{}
			for _, a := range arts {
				got = append(got, strconv.Itoa(a.JobNum)+"/"+a.Path)
			}
			if strings.Join(got, ",") != strings.Join(tc.want, ",") {
				t.Fatalf("artifacts %v, want %v", got, tc.want)
			}
			if strings.Contains(body, "null") {
				t.Errorf("answer holds null: %s", body)
			}
		})
	}
	_, body := e.fetch(t, "/api/v1/runs/hello/artifacts?job=0", e.seeded.Tokens.Viewer)
	var arts []map[string]any
	if err := json.Unmarshal([]byte(body), &arts); err != nil {
		t.Fatal(err)
	}
	a := arts[0]
	if a["job_num"] != 0.0 || a["job_name"] != "hello-0-0" || a["path"] != "out/model.bin" || a["size"] != 7.0 || a["modified_at"] == "" {
		t.Errorf("first artifact %v", a)
	}
}

func TestArtifactsAPI_downloadsOneFileAsAnAttachment(t *testing.T) {
	e := newArtifactEnv(t, true)
	resp, body := e.fetch(t, "/api/v1/runs/hello/artifacts/0/report%201.txt", e.seeded.Tokens.Viewer)
	if resp.StatusCode != http.StatusOK || body != "loss=0.1\n" {
		t.Fatalf("status %d, body %q", resp.StatusCode, body)
	}
	h := resp.Header
	if h.Get("Content-Type") != "application/octet-stream" || h.Get("Content-Length") != "9" ||
		h.Get("Content-Disposition") != `attachment; filename="report 1.txt"` {
		t.Errorf("headers %v", h)
	}
	if _, body := e.fetch(t, "/api/v1/runs/hello/artifacts/1/out/model.bin", e.seeded.Tokens.Viewer); body != "other weights" {
		t.Errorf("job 1's file: %q", body)
	}
}

func TestArtifactsAPI_answersErrorsInTheAPIShape(t *testing.T) {
	e := newArtifactEnv(t, true)
	tok := e.seeded.Tokens.Viewer
	for name, tc := range map[string]struct {
		path, tok string
		status    int
	}{
		"unknown run":              {"/api/v1/runs/nope/artifacts", tok, 404},
		"unknown run's file":       {"/api/v1/runs/nope/artifacts/0/out/model.bin", tok, 404},
		"unknown file":             {"/api/v1/runs/hello/artifacts/0/missing.txt", tok, 404},
		"a folder is not a file":   {"/api/v1/runs/hello/artifacts/0/out", tok, 404},
		"replaced run's file":      {"/api/v1/runs/hello/artifacts/0/stale.txt", tok, 404},
		"job not a number":         {"/api/v1/runs/hello/artifacts?job=x", tok, 400},
		"job negative":             {"/api/v1/runs/hello/artifacts/-1/out/model.bin", tok, 400},
		"no token":                 {"/api/v1/runs/hello/artifacts", "", 401},
		"unknown token":            {"/api/v1/runs/hello/artifacts/0/out/model.bin", "not-a-token", 401},
		"no token for the file":    {"/api/v1/runs/hello/artifacts/0/out/model.bin", "", 401},
		"a run without artifacts":  {"/api/v1/runs/train/artifacts", tok, 200},
		"a user may read the list": {"/api/v1/runs/hello/artifacts", e.seeded.Tokens.User, 200},
		"an admin may download":    {"/api/v1/runs/hello/artifacts/0/out/model.bin", e.seeded.Tokens.Admin, 200},
	} {
		t.Run(name, func(t *testing.T) {
			resp, body := e.fetch(t, tc.path, tc.tok)
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tc.status, body)
			}
			if tc.status >= 400 {
				var apiErr web.APIError
				if err := json.Unmarshal([]byte(body), &apiErr); err != nil || apiErr.Message == "" {
					t.Errorf("error body %q is not {\"message\": …}", body)
				}
			}
		})
	}
}

// rawGet sends a request line as written (no client cleaning or
// escaping) and returns the status code.
func rawGet(t *testing.T, base, target, tok string) int {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := io.WriteString(conn, "GET "+target+" HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer "+tok+"\r\nConnection: close\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodGet, target, nil)
	resp, err := http.ReadResponse(bufio.NewReader(conn), req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	return resp.StatusCode
}

func TestArtifactsAPI_refusesPathsLeavingTheJobsFolder(t *testing.T) {
	e := newArtifactEnv(t, true)
	for _, p := range []string{
		"0/../../../../etc/passwd",
		"0/out/../../1/out/model.bin",
		"0/%2e%2e/%2e%2e/etc/passwd",
		"0/out%2F..%2F..%2F1%2Fout%2Fmodel.bin",
		"0//etc/passwd",
		"0/%2Fetc%2Fpasswd",
		"0/./out/model.bin",
		"0/out/",
		"0/out%5C..%5Cx",
	} {
		t.Run(p, func(t *testing.T) {
			if code := rawGet(t, e.url, "/api/v1/runs/hello/artifacts/"+p, e.seeded.Tokens.Viewer); code != http.StatusBadRequest {
				t.Fatalf("GET …/artifacts/%s: %d, want 400", p, code)
			}
		})
	}
	// The same checks let a good escaped path through.
	if code := rawGet(t, e.url, "/api/v1/runs/hello/artifacts/0/out%2Fmodel.bin", e.seeded.Tokens.Viewer); code != http.StatusOK {
		t.Errorf("an escaped slash inside the path: %d, want 200", code)
	}
}

func TestArtifactsAPI_isNotImplementedWithoutAStore(t *testing.T) {
	e := newArtifactEnv(t, false)
	if resp, body := e.fetch(t, "/api/v1/runs/hello/artifacts", e.seeded.Tokens.Viewer); resp.StatusCode != http.StatusNotImplemented {
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
	d := get(t, e.url+"/runs/hello", e.seeded.Tokens.Viewer)
	if d.Find(`[data-testid=artifacts-table]`).Length() != 0 {
		t.Error("the run page lists artifacts without a store")
	}
}

func TestRunPage_listsArtifactsWithDownloadLinks(t *testing.T) {
	e := newArtifactEnv(t, true)
	tok := e.seeded.Tokens.Viewer
	d := get(t, e.url+"/runs/hello", tok)
	links := d.Find(`[data-testid=artifacts-table] [data-testid=artifact-link]`)
	if links.Length() != len(helloArtifacts) {
		t.Fatalf("%d artifact links, want %d", links.Length(), len(helloArtifacts))
	}
	href, _ := links.Eq(1).Attr("href")
	if href != "/api/v1/runs/hello/artifacts/0/report%201.txt" {
		t.Errorf("link %q", href)
	}
	if _, body := e.fetch(t, href, tok); body != "loss=0.1\n" {
		t.Errorf("the link downloads %q", body)
	}
	if d := get(t, e.url+"/runs/train", tok); d.Find(`[data-testid=artifacts-table]`).Length() != 0 {
		t.Error("a run without artifacts shows an Artifacts section")
	}
}

func TestRunPage_listsTheFirst200Artifacts(t *testing.T) {
	e := newArtifactEnv(t, true)
	for i := range 250 {
		e.put(t, 2, fmt.Sprintf("ckpt/%03d.pt", i), "x")
	}
	d := get(t, e.url+"/runs/hello", e.seeded.Tokens.Viewer)
	if n := d.Find(`[data-testid=artifact-link]`).Length(); n != 200 {
		t.Errorf("%d links, want 200", n)
	}
	if got := d.Find(`[data-testid=artifacts-truncated]`).Text(); !strings.Contains(got, "200 of 253 files") {
		t.Errorf("truncation note %q", got)
	}
}
