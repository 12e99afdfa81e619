package main

import (
	"errors"
	"fmt"
	"regexp"

	"hoist/store"
)

// projectEntry is one entry of `projects:`, written as dstack writes the
// projects of its server/config.yml (`name`, `backends`), with the spec
// source of the project: `repo`, `branch` and `path` (one server, several
// repositories or several directories of one monorepo).
type projectEntry struct {
	Name string `yaml:"name"`
	// Backends are the project's backends, in the form of the top-level
	// `backends:`; a project that lists none uses the top-level ones.
	Backends []backendEntry `yaml:"backends"`
	// Repo, Branch and Path are the project's spec source, as the flags
	// --repo, --branch and --path are the source of project main.
	Repo   string `yaml:"repo"`
	Branch string `yaml:"branch"`
	Path   string `yaml:"path"`
	// Budget caps what the project may spend (budget.go).
	Budget budgetConfig `yaml:"budget"`
}

// projectNameRE is dstack's project name syntax (letters, digits, `-` and
// `_`; src/dstack/_internal/core/models/projects.py validates names with
// the same class).
var projectNameRE = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,50}$`)

// checkProjects validates `projects:`: names unique and of dstack's
// syntax, a source (`repo`) for every project but main (which may take the
// flags'), and backend names unique across the server: a backend is one
// per server (its instance records and, for the local backend, this host
// are the server's), so a project lists a backend of its own or uses the
// top-level ones.
func checkProjects(cfg serverConfig) error {
	seen := map[string]bool{}
	owner := map[string]string{}
	for _, e := range cfg.Backends {
		owner[backendName(e)] = "backends"
	}
	for i, p := range cfg.Projects {
		at := fmt.Sprintf("projects[%d]", i)
		switch {
		case p.Name == "":
			return fmt.Errorf("%s.name: a name is required", at)
		case !projectNameRE.MatchString(p.Name):
			return fmt.Errorf("%s.name: %q is not a project name (letters, digits, - and _)", at, p.Name)
		case seen[p.Name]:
			return fmt.Errorf("%s.name: project %q is configured twice", at, p.Name)
		case p.Repo == "" && p.Name != store.DefaultProject:
			return fmt.Errorf("%s.repo: project %q needs its spec repository (only project main takes --repo)", at, p.Name)
		case p.Repo == "" && (p.Branch != "" || p.Path != ""):
			return fmt.Errorf("%s.repo: branch and path go with repo (project main without repo takes --repo, --branch and --path)", at)
		}
		seen[p.Name] = true
		if err := p.Budget.check(at + ".budget"); err != nil {
			return err
		}
		for j, e := range p.Backends {
			bat := fmt.Sprintf("%s.backends[%d]", at, j)
			if e.Type == "" {
				return fmt.Errorf("%s: type is required", bat)
			}
			name := backendName(e)
			if o, ok := owner[name]; ok {
				return fmt.Errorf("%s: backend %q is configured by %s already (a backend is one per server: list it in the top-level backends for projects to share)", bat, name, o)
			}
			owner[name] = at
		}
	}
	return nil
}

// backendName is the name of a backend entry: its name, or its type.
func backendName(e backendEntry) string {
	if e.Name != "" {
		return e.Name
	}
	return e.Type
}

// projectSpec is one project the server runs: its name, its spec source
// and the names of its backends.
type projectSpec struct {
	name               string
	repo, branch, path string
	backends           []string
}

// serverProjects lists the projects of cfg: `projects:` in order, or, when
// it lists none, project main from the flags. A project main without a
// repo takes the flags' source; a project without backends the top-level
// ones. Flags no project takes are refused.
func serverProjects(cfg serverConfig, o serveOptions) ([]projectSpec, error) {
	var top []string
	for _, e := range cfg.Backends {
		top = append(top, backendName(e))
	}
	if len(cfg.Projects) == 0 {
		return []projectSpec{{name: store.DefaultProject, repo: o.repo, branch: o.branch, path: o.path, backends: top}}, nil
	}
	flags := false
	var out []projectSpec
	for _, p := range cfg.Projects {
		ps := projectSpec{name: p.Name, repo: p.Repo, branch: p.Branch, path: p.Path, backends: top}
		if p.Repo == "" {
			ps.repo, ps.branch, ps.path, flags = o.repo, o.branch, o.path, true
		}
		if len(p.Backends) > 0 {
			ps.backends = nil
			for _, e := range p.Backends {
				ps.backends = append(ps.backends, backendName(e))
			}
		}
		out = append(out, ps)
	}
	if !flags && (o.repo != "" || o.branch != "" || o.path != "") {
		return nil, errors.New("--repo, --branch and --path are the source of project main, and every project of projects has its own repo")
	}
	return out, nil
}

// allBackends is the config with every backend the server opens: the
// top-level ones and those projects list.
func allBackends(cfg serverConfig) serverConfig {
	out := cfg
	out.Backends = append([]backendEntry(nil), cfg.Backends...)
	for _, p := range cfg.Projects {
		out.Backends = append(out.Backends, p.Backends...)
	}
	return out
}
