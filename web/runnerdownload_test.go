package web

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestRunnerDownload_servesTheRunnerOnlyToAGrantOfItsArchitecture(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "hoist-runner")
	if err := os.WriteFile(bin, []byte("the runner binary"), 0o755); err != nil {
		t.Fatal(err)
	}
	now := t0
	dl := NewRunnerDownloads([]byte("server secret"), func(arch string) (string, error) {
		if arch != "amd64" {
			return "", errors.New("not built")
		}
		return bin, nil
	}, func() time.Time { return now })
	if _, _, err := dl.Grant("task-1", "amd64"); err == nil {
		t.Fatal("Grant before SetBaseURL succeeded")
	}
	f := newFixture(t, func(_ *Config, d *Deps) { d.RunnerDownloads = dl })
	dl.SetBaseURL(f.ts.URL + "/")
	url, token, err := dl.Grant("task-1", "amd64")
	if err != nil || url != f.ts.URL+"/agents/runner/amd64" {
		t.Fatalf("Grant = %q, %v", url, err)
	}
	armURL, armToken, _ := dl.Grant("task-2", "arm64")
	other := NewRunnerDownloads([]byte("another server's secret"), nil, func() time.Time { return now })
	other.SetBaseURL(f.ts.URL)
	_, foreign, _ := other.Grant("task-1", "amd64")
	tests := []struct {
		name, path, token string
		want              int
	}{
		{"the grant downloads", "/agents/runner/amd64", token, 200},
		{"no token is refused", "/agents/runner/amd64", "", 401},
		{"a tampered token is refused", "/agents/runner/amd64", strings.Replace(token, ".", "x.", 1), 401},
		{"another server's grant is refused", "/agents/runner/amd64", foreign, 401},
		{"a grant for another architecture is refused", "/agents/runner/amd64", armToken, 401},
		{"an architecture without a runner is not found", strings.TrimPrefix(armURL, f.ts.URL), armToken, 404},
		{"an API token is no grant", "/agents/runner/amd64", adminTok, 401},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := f.do(t, "GET", tt.path, tt.token, nil)
			body := readBody(t, r)
			if r.StatusCode != tt.want || (tt.want == 200 && body != "the runner binary") {
				t.Errorf("GET %s = %d %q, want %d", tt.path, r.StatusCode, body, tt.want)
			}
		})
	}
	t.Run("an expired grant is refused", func(t *testing.T) {
		now = t0.Add(RunnerDownloadTTL + time.Minute)
		defer func() { now = t0 }()
		r := f.do(t, "GET", "/agents/runner/amd64", token, nil)
		if body := readBody(t, r); r.StatusCode != 401 || !strings.Contains(body, "expired") {
			t.Errorf("GET = %d %q, want 401 saying it expired", r.StatusCode, body)
		}
	})
}
