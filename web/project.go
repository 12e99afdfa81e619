package web

import (
	"fmt"
	"net/http"
	"net/url"
	"sort"

	"github.com/labstack/echo/v5"
)

// ProjectDeps are one project's collaborators: everything the server reads
// or changes that belongs to a project. Deps' fields of the same names are
// the default project's.
type ProjectDeps struct {
	// Store reads the project's runs, jobs, logs, events and revisions
	// (required).
	Store Store
	// Syncer reports the project's sync status and syncs it (required).
	Syncer Syncer
	// Inventory lists the project's fleets, instances, volumes and gateways.
	Inventory Inventory
	// Planner computes the project's plans and reads its past specs.
	Planner Planner
	// Controller carries out actions on the project's runs and revisions.
	Controller Controller
	// Secrets keeps the project's secrets.
	Secrets Secrets
	// Artifacts serves the project's jobs' artifact files.
	Artifacts Artifacts
	// ServiceStatuses shows the project's service runs' replicas and traffic.
	ServiceStatuses ServiceStatuses
	// JobMetrics shows the project's running jobs' resource use.
	JobMetrics JobMetrics
}

// access is what a route needs of the caller's role in its project.
type access int

// Accesses, least demanding first.
const (
	accessRead   access = iota // viewer and above
	accessAct                  // user and above
	accessManage               // manager and above
)

func (a access) String() string {
	switch a {
	case accessAct:
		return "act"
	case accessManage:
		return "manage"
	}
	return "read"
}

func (a access) allows(r Role) bool {
	switch a {
	case accessAct:
		return r.CanAct()
	case accessManage:
		return r.CanManage()
	}
	return r.CanRead()
}

// project is one project the server serves.
type project struct {
	ProjectDeps
	name    string
	runList *runListCache
}

// reqProject is the project a request addresses and the caller's role in it.
type reqProject struct {
	*project
	// Role is the caller's role in the project.
	Role Role
	// Base prefixes the project's pages: "" for the default project,
	// "/projects/<name>" for the others.
	Base string
}

const ctxProject = "hoist.project"

// errNoProject answers both an unknown project and one the caller has no
// role in, so that project names do not leak.
var errNoProject = echo.NewHTTPError(http.StatusNotFound, "project not found")

// buildProjects checks deps and returns the default project's name and every
// project by name.
func buildProjects(cfg Config, deps Deps) (string, map[string]*project, error) {
	def := cfg.DefaultProject
	if def == "" {
		def = DefaultProject
	}
	all := map[string]ProjectDeps{def: {
		Store: deps.Store, Syncer: deps.Syncer, Inventory: deps.Inventory, Planner: deps.Planner,
		Controller: deps.Controller, Secrets: deps.Secrets, Artifacts: deps.Artifacts,
		ServiceStatuses: deps.ServiceStatuses, JobMetrics: deps.JobMetrics,
	}}
	for name, pd := range deps.Projects {
		if name == def {
			return "", nil, fmt.Errorf("web: deps.Projects[%q] is the default project, whose collaborators are Deps' own fields", name)
		}
		if name == "" || url.PathEscape(name) != name {
			return "", nil, fmt.Errorf("web: deps.Projects: project name %q is not a plain URL path segment", name)
		}
		all[name] = pd
	}
	out := make(map[string]*project, len(all))
	for name, pd := range all {
		if pd.Store == nil {
			return "", nil, fmt.Errorf("web: project %s: Store is required", name)
		}
		if pd.Syncer == nil {
			return "", nil, fmt.Errorf("web: project %s: Syncer is required", name)
		}
		out[name] = &project{ProjectDeps: pd, name: name, runList: newRunListCache(cfg.ListCacheTTL)}
	}
	return def, out, nil
}

// inProject resolves the request's project (the :project path parameter,
// else the default project) and checks the caller's role in it: 404 for an
// unknown project and for one the caller has no role in, 403 when the role
// does not allow need.
func (s *Server) inProject(need access) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c *echo.Context) error {
			name := c.Param("project")
			if name == "" {
				name = s.defaultProject
			}
			p, role, err := s.projectRole(c, name)
			if err != nil {
				return err
			}
			if !need.allows(role) {
				return echo.NewHTTPError(http.StatusForbidden, fmt.Sprintf("role %s in project %s may not %s here", role, name, need))
			}
			rp := &reqProject{project: p, Role: role}
			if name != s.defaultProject {
				rp.Base = "/projects/" + name
			}
			c.Set(ctxProject, rp)
			return next(c)
		}
	}
}

// projectRole is project name and the caller's role in it; errNoProject
// (404) both when the server does not serve it and when the caller has no
// role in it, so that project names do not leak.
func (s *Server) projectRole(c *echo.Context, name string) (*project, Role, error) {
	p, ok := s.projects[name]
	role := principal(c).RoleIn(name)
	if !ok || !role.CanRead() {
		return nil, "", errNoProject
	}
	return p, role, nil
}

// proj is the project of a request that passed inProject. Handlers read
// and change a project only through it.
func (s *Server) proj(c *echo.Context) *reqProject {
	if rp, ok := c.Get(ctxProject).(*reqProject); ok {
		return rp
	}
	// Routes outside a project (errors, login) see the default project
	// with the caller's role in it.
	return &reqProject{project: s.projects[s.defaultProject], Role: principal(c).RoleIn(s.defaultProject)}
}

// defaultProj is the default project, for work outside a request
// (webhooks, pull-request plans).
func (s *Server) defaultProj() *project { return s.projects[s.defaultProject] }

// ProjectRole is one project and the caller's role in it
// (GET /api/v1/projects).
type ProjectRole struct {
	Name string `json:"name"`
	Role Role   `json:"role"`
	// Default is set on the project the unprefixed routes address.
	Default bool `json:"default,omitempty"`
}

// visibleProjects lists the projects p may read, by name.
func (s *Server) visibleProjects(p Principal) []ProjectRole {
	out := []ProjectRole{}
	for name := range s.projects {
		if r := p.RoleIn(name); r.CanRead() {
			out = append(out, ProjectRole{Name: name, Role: r, Default: name == s.defaultProject})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func (s *Server) apiProjects(c *echo.Context) error {
	return c.JSON(http.StatusOK, s.visibleProjects(principal(c)))
}

// projectList is every project, by name.
func (s *Server) projectList() []*project {
	out := make([]*project, 0, len(s.projects))
	for _, p := range s.projects {
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out
}
