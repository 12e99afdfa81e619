package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestLoadServerConfig_refusesBadProjects: `projects:` errors name the
// config file and the entry's field.
func TestLoadServerConfig_refusesBadProjects(t *testing.T) {
	dir := t.TempDir()
	for name, tc := range map[string]struct{ yaml, want string }{
		"no name":            {"projects:\n  - repo: /r\n", "projects[0].name: a name is required"},
		"bad name":           {"projects:\n  - name: a/b\n    repo: /r\n", "projects[0].name: \"a/b\" is not a project name"},
		"twice":              {"projects:\n  - name: a\n    repo: /r\n  - name: a\n    repo: /s\n", "projects[1].name: project \"a\" is configured twice"},
		"no repo":            {"projects:\n  - name: a\n    path: x\n", "projects[0].repo: project \"a\" needs its spec repository"},
		"main path no repo":  {"projects:\n  - name: main\n    path: x\n", "projects[0].repo: branch and path go with repo"},
		"unknown field":      {"projects:\n  - name: a\n    repo: /r\n    pth: x\n", "pth"},
		"backend no type":    {"projects:\n  - name: a\n    repo: /r\n    backends:\n      - name: x\n", "projects[0].backends[0]: type is required"},
		"backend elsewhere":  {"backends:\n  - type: local\nprojects:\n  - name: a\n    repo: /r\n    backends:\n      - type: local\n", "projects[0].backends[0]: backend \"local\" is configured by backends already"},
		"backend in two":     {"projects:\n  - name: a\n    repo: /r\n    backends: [{type: ssh}]\n  - name: b\n    repo: /r\n    backends: [{type: ssh}]\n", "projects[1].backends[0]: backend \"ssh\" is configured by projects[0] already"},
		"policy of stranger": {"projects:\n  - name: a\n    repo: /r\npolicy:\n  projects:\n    c: {}\n", "policy.projects.c"},
	} {
		t.Run(name, func(t *testing.T) {
			p := filepath.Join(dir, strings.ReplaceAll(name, " ", "-")+".yml")
			if err := os.WriteFile(p, []byte(tc.yaml), 0o600); err != nil {
				t.Fatal(err)
			}
			cfg, err := loadServerConfig(p)
			if err == nil {
				_, err = projectPolicy(cfg, "a", dir, "")
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("loadServerConfig = %v, want an error mentioning %q", err, tc.want)
			}
			if !strings.Contains(err.Error(), p) && !strings.HasPrefix(tc.want, "policy") {
				t.Errorf("error %q does not name the file %s", err, p)
			}
		})
	}
}

// TestServerProjects_sourcesAndBackends: dstack's `projects:` form is
// accepted; main without a repo takes the flags' source; a project without
// backends uses the top-level ones; no projects means main from --repo.
func TestServerProjects_sourcesAndBackends(t *testing.T) {
	p := filepath.Join(t.TempDir(), "config.yml")
	yaml := `backends:
  - type: local
projects:
  - name: main
  - name: ml-team
    repo: https://example.com/ml.git
    branch: prod
    path: specs
    backends:
      - type: ssh
`
	if err := os.WriteFile(p, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := loadServerConfig(p)
	if err != nil {
		t.Fatal(err)
	}
	o := serveOptions{repo: "/srv/specs", branch: "main", path: "hoist"}
	got, err := serverProjects(cfg, o)
	if err != nil {
		t.Fatal(err)
	}
	want := []projectSpec{
		{name: "main", repo: "/srv/specs", branch: "main", path: "hoist", backends: []string{"local"}},
		{name: "ml-team", repo: "https://example.com/ml.git", branch: "prod", path: "specs", backends: []string{"ssh"}},
	}
	if !slices.EqualFunc(got, want, func(a, b projectSpec) bool {
		return a.name == b.name && a.repo == b.repo && a.branch == b.branch && a.path == b.path && slices.Equal(a.backends, b.backends)
	}) {
		t.Errorf("serverProjects = %+v\nwant %+v", got, want)
	}
	if n := localShares(cfg, got)["local"]; n != 1 {
		t.Errorf("local shares = %d; want 1 (only main uses the local backend)", n)
	}
	if bes := allBackends(cfg).Backends; len(bes) != 2 {
		t.Errorf("server backends = %+v; want local and ssh", bes)
	}
	one, err := serverProjects(serverConfig{Backends: cfg.Backends}, o)
	if err != nil || len(one) != 1 || one[0].name != "main" || one[0].repo != "/srv/specs" {
		t.Errorf("no projects: %+v, %v; want main from the flags", one, err)
	}
	own := serverConfig{Projects: []projectEntry{{Name: "a", Repo: "/r"}}}
	if _, err := serverProjects(own, o); err == nil || !strings.Contains(err.Error(), "--repo") {
		t.Errorf("--repo that no project takes: %v; want it refused", err)
	}
}
