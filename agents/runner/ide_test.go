package runner_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/rand"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"hoist/agents/api"
)

// tarEntry is one entry of a test archive: a file (Body), a directory
// (name ending in /) or a symbolic link (Link).
type tarEntry struct {
	Name, Body, Link string
	Mode             int64
}

func ideArchive(t testing.TB, entries []tarEntry) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	for _, e := range entries {
		h := &tar.Header{Name: e.Name, Mode: e.Mode, Typeflag: tar.TypeReg, Size: int64(len(e.Body))}
		switch {
		case e.Link != "":
			h.Typeflag, h.Linkname, h.Size = tar.TypeSymlink, e.Link, 0
		case strings.HasSuffix(e.Name, "/"):
			h.Typeflag, h.Size = tar.TypeDir, 0
		}
		if h.Mode == 0 {
			h.Mode = 0o644
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(e.Body)); err != nil {
			t.Fatal(err)
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

// vscodeServer is a small stand-in for a VS Code server archive, whose
// entries sit under one top directory as the real one's do.
var vscodeServer = []tarEntry{
	{Name: "vscode-server-linux-x64/", Mode: 0o755},
	{Name: "vscode-server-linux-x64/product.json", Body: `{"commit":"abc123"}` + "\n"},
	{Name: "vscode-server-linux-x64/bin/", Mode: 0o755},
	{Name: "vscode-server-linux-x64/bin/code-server", Body: "#!/bin/sh\necho code-server \"$@\"\n", Mode: 0o755},
	{Name: "vscode-server-linux-x64/node", Link: "bin/code-server"},
}

// TestRunner_ideServerIsInstalledBeforeTheCommands: a job with an IDE gets
// the server's archive downloaded and extracted, top directory stripped,
// into its user's home at the install dir before its commands run; a
// download that fails, or an archive that leaves the install dir, fails the
// job with the reason in its log and termination message, and runs nothing.
func TestRunner_ideServerIsInstalledBeforeTheCommands(t *testing.T) {
	good := ideArchive(t, vscodeServer)
	escaping := ideArchive(t, []tarEntry{{Name: "top/../../evil", Body: "x"}})
	mux := http.NewServeMux()
	var gets int
	mux.HandleFunc("GET /commit:abc123/server-linux-x64/stable", func(w http.ResponseWriter, _ *http.Request) {
		gets++
		_, _ = w.Write(good)
	})
	mux.HandleFunc("GET /escaping.tar.gz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write(escaping) })
	mux.HandleFunc("GET /corrupt.tar.gz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("not gzip")) })
	srv := httptest.NewServer(mux)
	defer srv.Close()

	const dir = ".vscode-server/bin/abc123"
	cmds := []string{"cat ~/" + dir + "/product.json", "~/" + dir + "/node hello", "echo commands ran"}
	for _, tc := range []struct {
		name, url, wantState, wantReason, wantLog string
		wantOut                                   string
	}{
		{name: "installed", url: srv.URL + "/commit:abc123/server-linux-x64/stable", wantState: api.JobDone, wantReason: api.ReasonDoneByRunner,
			wantOut: "Installing the vscode server abc123 into ~/" + dir + "\nInstalled the vscode server abc123\n" +
				`{"commit":"abc123"}` + "\ncode-server hello\ncommands ran\n"},
		{name: "not found", url: srv.URL + "/commit:nope/server-linux-x64/stable", wantState: api.JobFailed, wantReason: api.ReasonExecutorError,
			wantLog: "download: 404 Not Found"},
		{name: "not a tar.gz", url: srv.URL + "/corrupt.tar.gz", wantState: api.JobFailed, wantReason: api.ReasonExecutorError,
			wantLog: "gunzip"},
		{name: "entry leaving the install dir", url: srv.URL + "/escaping.tar.gz", wantState: api.JobFailed, wantReason: api.ReasonExecutorError,
			wantLog: "path leaves the working dir"},
		{name: "server unreachable", url: "http://127.0.0.1:1/x.tar.gz", wantState: api.JobFailed, wantReason: api.ReasonExecutorError,
			wantLog: "connection refused"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, _, wd := newRunner(t)
			home := t.TempDir()
			st := run(t, c, api.JobSpec{Commands: cmds, WorkingDir: wd, Env: map[string]string{"HOME": home},
				IDE: &api.IDESpec{Name: "vscode", Version: "abc123", DownloadURL: tc.url, InstallDir: dir}})
			if st.State != tc.wantState || st.TerminationReason != tc.wantReason {
				t.Fatalf("state %s (%s: %s), want %s (%s)", st.State, st.TerminationReason, st.TerminationMessage, tc.wantState, tc.wantReason)
			}
			out, errs := stdout(t, c)
			if tc.wantOut != "" && out != tc.wantOut {
				t.Errorf("stdout = %q, want %q", out, tc.wantOut)
			}
			if tc.wantLog == "" {
				if fi, err := os.Stat(filepath.Join(home, dir, "bin", "code-server")); err != nil || fi.Mode().Perm() != 0o755 {
					t.Errorf("code-server: %v, %v; want mode 0755", fi, err)
				}
				return
			}
			if !strings.Contains(st.TerminationMessage, tc.wantLog) || !strings.Contains(st.TerminationMessage, tc.url) || !strings.Contains(errs, tc.wantLog) {
				t.Errorf("termination message %q, stderr %q: want %q and the URL", st.TerminationMessage, errs, tc.wantLog)
			}
			if strings.Contains(out, "commands ran") {
				t.Errorf("the commands ran without the IDE server: %q", out)
			}
			if ents, _ := os.ReadDir(filepath.Join(home, filepath.Dir(dir))); len(ents) != 0 {
				t.Errorf("a failed install left %v behind", ents)
			}
		})
	}

	// A server already in place (a home that outlives jobs) is used as is.
	c, _, wd := newRunner(t)
	home := t.TempDir()
	if err := os.MkdirAll(filepath.Join(home, dir), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(home, dir, "product.json"), []byte("kept\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	before := gets
	st := run(t, c, api.JobSpec{Commands: []string{"cat ~/" + dir + "/product.json"}, WorkingDir: wd, Env: map[string]string{"HOME": home},
		IDE: &api.IDESpec{Name: "vscode", Version: "abc123", DownloadURL: srv.URL + "/commit:abc123/server-linux-x64/stable", InstallDir: dir}})
	if out, _ := stdout(t, c); st.State != api.JobDone || !strings.HasSuffix(out, "kept\n") || gets != before {
		t.Errorf("state %s, stdout %q, %d downloads: want the installed server kept", st.State, out, gets-before)
	}
}

// TestRunner_stopDuringIDEInstallEndsTheJob: a stop while the IDE server
// downloads ends the download and the job, with the stop's reason, and the
// commands never run.
func TestRunner_stopDuringIDEInstallEndsTheJob(t *testing.T) {
	started := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		close(started)
		<-req.Context().Done() // a download that never ends
	}))
	defer srv.Close()
	c, _, wd := newRunner(t)
	if err := c.Submit(ctx(t), api.JobSpec{Commands: []string{"echo commands ran"}, WorkingDir: wd, Env: map[string]string{"HOME": t.TempDir()},
		IDE: &api.IDESpec{Name: "cursor", Version: "1.2.3", DownloadURL: srv.URL + "/server.tar.gz", InstallDir: ".cursor-server/cli/servers/Stable-1.2.3/server"}}); err != nil {
		t.Fatal(err)
	}
	resp, err := c.Run(ctx(t))
	if err != nil || resp.State.State != api.JobRunning || resp.WorkingDir != wd {
		t.Fatalf("Run = %+v, %v; want running in %s", resp, err, wd)
	}
	<-started
	if _, err := c.StopWithReason(ctx(t), 10*time.Second, "inactivity_duration_exceeded", "nobody came"); err != nil {
		t.Fatal(err)
	}
	st, err := c.Wait(ctx(t))
	if err != nil || st.State != api.JobTerminated || st.TerminationReason != "inactivity_duration_exceeded" || st.TerminationMessage != "nobody came" {
		t.Fatalf("state %+v, %v; want terminated with the stop's reason", st, err)
	}
	if out, _ := stdout(t, c); strings.Contains(out, "commands ran") {
		t.Errorf("the commands ran: %q", out)
	}
}

// BenchmarkRunner_ideServerInstall measures installing an IDE server the
// size of VS Code's (64 MiB in 1,000 files, incompressible) from a loopback
// HTTP server, from Run until the job's commands have run.
func BenchmarkRunner_ideServerInstall(b *testing.B) {
	entries := []tarEntry{{Name: "server/", Mode: 0o755}}
	body := make([]byte, 64<<10)
	for i := range 1000 {
		_, _ = rand.Read(body)
		entries = append(entries, tarEntry{Name: fmt.Sprintf("server/lib/%03d/file-%d.js", i%50, i), Body: string(body)})
	}
	archive := ideArchive(b, entries)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write(archive) }))
	defer srv.Close()
	b.SetBytes(int64(len(archive)))
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		c, _, wd := newRunner(b)
		spec := api.JobSpec{Commands: []string{"true"}, WorkingDir: wd, Env: map[string]string{"HOME": b.TempDir()},
			IDE: &api.IDESpec{Name: "vscode", Version: "abc", DownloadURL: srv.URL + "/s.tar.gz", InstallDir: ".vscode-server/bin/abc"}}
		if err := c.Submit(b.Context(), spec); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		if _, err := c.Run(b.Context()); err != nil {
			b.Fatal(err)
		}
		if st, err := c.Wait(b.Context()); err != nil || st.State != api.JobDone {
			b.Fatalf("state %+v, %v", st, err)
		}
	}
}
