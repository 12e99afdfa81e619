package policy

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"

	"hoist/schema"
)

// Config is the `policy` section of the server config file. Its own Grant
// applies to every backend of every project; Backends and Projects grant
// more to one backend or one project. Grants add up: nothing is allowed
// that no entry grants.
type Config struct {
	Grant `yaml:",inline"`
	// Backends grants more on the hosts of one backend, by backend name.
	Backends map[string]Grant `yaml:"backends"`
	// Projects grants more to the specs of one project, by project name.
	Projects map[string]ProjectConfig `yaml:"projects"`
}

// ProjectConfig grants more to the specs of one project: on every backend
// (its own Grant) or on one backend (Backends).
type ProjectConfig struct {
	Grant `yaml:",inline"`
	// Backends grants more on the hosts of one backend, by backend name.
	Backends map[string]Grant `yaml:"backends"`
}

// Grant is what one entry of the policy allows.
type Grant struct {
	// InstanceVolumes are the host directories (with everything below
	// them) that instance volumes may mount.
	InstanceVolumes []VolumeGrant `yaml:"instance_volumes"`
	// Privileged allows `privileged: true`. There is no grant for
	// `docker: true`: hoist refuses it whatever the policy says (see
	// reconciler/support), so a `docker` key is refused as unknown.
	Privileged bool `yaml:"privileged"`
}

// VolumeGrant allows instance volumes at or below Path, read-only unless
// ReadWrite is set.
type VolumeGrant struct {
	// Path is an absolute host path.
	Path string `yaml:"path"`
	// ReadWrite mounts the volumes it allows writable.
	ReadWrite bool `yaml:"read_write"`
}

// Env is what the policy needs to know about the server it guards.
type Env struct {
	// Project is the project whose specs this policy checks.
	Project string
	// Projects are every project the server runs (Project alone when
	// empty): `policy.projects` may grant to any of them.
	Projects []string
	// Backends are the names of the configured backends; a run may land on
	// any of them unless its spec names some in `backends`.
	Backends []string
	// LocalBackends are the configured backends whose hosts are this
	// machine: on them paths are resolved with Resolve and DataDir and
	// AgentDirs are the server's own.
	LocalBackends []string
	// RemoteBackends are the configured backends of SSH hosts, which a
	// run's `backends` names `remote` as dstack does.
	RemoteBackends []string
	// PodBackends are the configured backends whose jobs run as pods
	// (Kubernetes): the image's own entrypoint is not known there (there
	// is no registry to read it from), and a container runs as a numeric
	// user id.
	PodBackends []string
	// DataDir is the server's data directory (never mountable).
	DataDir string
	// DockerHost is DOCKER_HOST; the socket a unix:// address names is
	// never mountable.
	DockerHost string
	// AgentDirs are more directories of the agents' state on this machine
	// (shim state, runner homes) outside DataDir.
	AgentDirs []string
	// Resolve resolves the symbolic links of an absolute path on this
	// machine (ResolveSymlinks); nil leaves paths as written.
	Resolve func(path string) (string, error)
}

// systemDirs are the host directories no instance volume may mount, with
// everything below them.
var systemDirs = []string{"/etc", "/root", "/proc", "/sys", "/dev", "/boot"}

// dockerSockets are the default places of the Docker Engine's socket.
var dockerSockets = []string{"/var/run/docker.sock", "/run/docker.sock"}

// denied is one hard-denied path and what it is, for messages.
type denied struct {
	path, what string
}

// hardDenied lists the paths of env that no config can make mountable,
// each with what it is. A path equal to, below or containing one of them
// is refused; `/` is refused as it contains them all.
func hardDenied(env Env) []denied {
	var out []denied
	seen := map[string]bool{}
	add := func(p, what string) {
		if p == "" || !filepath.IsAbs(p) {
			return
		}
		p = filepath.Clean(p)
		for _, q := range []string{p, resolveOr(env.Resolve, p)} {
			if !seen[q] {
				seen[q] = true
				out = append(out, denied{q, what})
			}
		}
	}
	for _, d := range systemDirs {
		add(d, "a system directory of the host")
	}
	for _, s := range dockerSockets {
		add(s, "the Docker socket")
	}
	if s, ok := strings.CutPrefix(env.DockerHost, "unix://"); ok {
		add(s, "the Docker socket")
	}
	if env.DataDir != "" {
		abs, err := filepath.Abs(env.DataDir)
		if err == nil {
			add(abs, "the server's data directory")
		}
	}
	for _, d := range env.AgentDirs {
		add(d, "the agents' state")
	}
	return out
}

func resolveOr(resolve func(string) (string, error), p string) string {
	if resolve == nil {
		return p
	}
	r, err := resolve(p)
	if err != nil {
		return p
	}
	return r
}

// within reports whether p is dir or below it.
func within(p, dir string) bool {
	if dir == "/" {
		return true
	}
	return p == dir || strings.HasPrefix(p, dir+"/")
}

// Policy is a compiled Config for one server. The zero value is not
// usable: build it with New. A nil *Policy allows nothing.
type Policy struct {
	env    Env
	deny   []denied
	grants map[string]grantSet // by backend name
}

// grantSet is what the entries of one backend add up to.
type grantSet struct {
	vols       []volGrant
	privileged bool
}

type volGrant struct {
	path     string // as configured, cleaned
	resolved string // with symlinks resolved on local backends
	rw       bool
}

// New checks cfg against env and compiles it. It refuses a config that
// names a backend or project this server does not have, and a volume
// grant that is relative, holds "..", is `/`, or lies at or below a path
// that is never mountable; errors name the setting.
func New(cfg Config, env Env) (*Policy, error) {
	p := &Policy{env: env, deny: hardDenied(env), grants: map[string]grantSet{}}
	var errs []error
	for name := range cfg.Backends {
		if !slices.Contains(env.Backends, name) {
			errs = append(errs, fmt.Errorf("policy.backends.%s: no backend %q is configured", name, name))
		}
	}
	for proj, pc := range cfg.Projects {
		if proj != env.Project && !slices.Contains(env.Projects, proj) {
			errs = append(errs, fmt.Errorf("policy.projects.%s: this server reconciles no project %q", proj, proj))
		}
		for name := range pc.Backends {
			if !slices.Contains(env.Backends, name) {
				errs = append(errs, fmt.Errorf("policy.projects.%s.backends.%s: no backend %q is configured", proj, name, name))
			}
		}
	}
	backends := env.Backends
	if len(backends) == 0 {
		backends = []string{""}
	}
	for _, b := range backends {
		entries := []struct {
			setting string
			g       Grant
		}{
			{"policy", cfg.Grant},
			{"policy.backends." + b, cfg.Backends[b]},
			{"policy.projects." + env.Project, cfg.Projects[env.Project].Grant},
			{"policy.projects." + env.Project + ".backends." + b, cfg.Projects[env.Project].Backends[b]},
		}
		var gs grantSet
		for _, e := range entries {
			gs.privileged = gs.privileged || e.g.Privileged
			for i, v := range e.g.InstanceVolumes {
				vg, err := p.volumeGrant(b, v)
				if err != nil {
					errs = append(errs, fmt.Errorf("%s.instance_volumes[%d].path: %w", e.setting, i, err))
					continue
				}
				gs.vols = append(gs.vols, vg)
			}
		}
		p.grants[b] = gs
	}
	if len(errs) > 0 {
		return nil, dedupe(errs)
	}
	return p, nil
}

// dedupe joins errs, dropping repeats (an entry for every backend is
// checked once per backend).
func dedupe(errs []error) error {
	seen := map[string]bool{}
	var msgs []string
	for _, e := range errs {
		if !seen[e.Error()] {
			seen[e.Error()] = true
			msgs = append(msgs, e.Error())
		}
	}
	sort.Strings(msgs)
	return errors.New(strings.Join(msgs, "\n"))
}

func (p *Policy) volumeGrant(backend string, v VolumeGrant) (volGrant, error) {
	clean, resolved, err := p.canon(backend, v.Path)
	if err != nil {
		return volGrant{}, err
	}
	if clean == "/" || resolved == "/" {
		return volGrant{}, errors.New("/ can never be mounted: it holds the whole host")
	}
	for _, q := range []string{clean, resolved} {
		for _, d := range p.deny {
			if within(q, d.path) {
				return volGrant{}, fmt.Errorf("%s can never be mounted: %s", v.Path, describe(q, d))
			}
		}
	}
	return volGrant{path: clean, resolved: resolved, rw: v.ReadWrite}, nil
}

// canon cleans path and, on a local backend, resolves its symlinks.
func (p *Policy) canon(backend, path string) (clean, resolved string, err error) {
	if path == "" {
		return "", "", errors.New("empty path")
	}
	if !filepath.IsAbs(path) {
		return "", "", fmt.Errorf("%s is not an absolute path", path)
	}
	if slices.Contains(strings.Split(path, "/"), "..") {
		return "", "", fmt.Errorf("%s holds \"..\"", path)
	}
	clean = filepath.Clean(path)
	resolved = clean
	if p.env.Resolve != nil && slices.Contains(p.env.LocalBackends, backend) {
		if resolved, err = p.env.Resolve(clean); err != nil {
			return "", "", fmt.Errorf("resolve %s: %w", clean, err)
		}
	}
	return clean, resolved, nil
}

// describe says how q meets the denied path d.
func describe(q string, d denied) string {
	switch {
	case q == d.path:
		return fmt.Sprintf("%s is %s", q, d.what)
	case within(q, d.path):
		return fmt.Sprintf("%s is inside %s, %s", q, d.path, d.what)
	default:
		return fmt.Sprintf("%s contains %s, %s", q, d.path, d.what)
	}
}

// Access is the policy's answer for one instance volume on one backend.
type Access struct {
	// Allowed is true when the path may be mounted.
	Allowed bool
	// ReadWrite is true when it may be mounted writable.
	ReadWrite bool
	// HardDenied is true when no config can allow the path.
	HardDenied bool
	// Reason says why a path is refused and, unless HardDenied, which
	// settings would allow it.
	Reason string
}

// InstanceVolume decides whether an instance volume at path may be
// mounted on the hosts of backend, and how.
func (p *Policy) InstanceVolume(backend, path string) Access {
	if p == nil {
		return Access{Reason: fmt.Sprintf("instance path %s is not allowed: this server has no policy granting instance volumes", path)}
	}
	clean, resolved, err := p.canon(backend, path)
	if err != nil {
		return Access{HardDenied: true, Reason: fmt.Sprintf("instance path refused: %v", err)}
	}
	for _, q := range []string{clean, resolved} {
		for _, d := range p.deny {
			if within(q, d.path) || within(d.path, q) {
				shown := describe(q, d)
				if q != clean {
					shown = fmt.Sprintf("%s resolves to %s, and %s", clean, resolved, shown)
				}
				return Access{HardDenied: true, Reason: fmt.Sprintf("instance path %s is never mountable: %s; no server config can allow it", path, shown)}
			}
		}
	}
	gs := p.grants[p.grantKey(backend)]
	acc := Access{}
	for _, g := range gs.vols {
		if within(resolved, g.resolved) && within(clean, g.path) {
			acc.Allowed = true
			acc.ReadWrite = acc.ReadWrite || g.rw
		}
	}
	if !acc.Allowed {
		acc.Reason = fmt.Sprintf("instance path %s is not allowed on backend %s: allow it with %s in the server config",
			path, backend, p.settings(backend, "instance_volumes"))
	}
	return acc
}

// Privileged reports whether runs may be privileged on backend.
func (p *Policy) Privileged(backend string) bool {
	return p != nil && p.grants[p.grantKey(backend)].privileged
}

// PrivilegedReason is the refusal of a privileged run on backend, naming
// the settings that would allow it.
func (p *Policy) PrivilegedReason(backend string) string {
	return fmt.Sprintf("privileged containers are not allowed on backend %s: allow them with %s in the server config",
		backend, p.settings(backend, "privileged"))
}

func (p *Policy) grantKey(backend string) string {
	if _, ok := p.grants[backend]; ok {
		return backend
	}
	return ""
}

// settings names the server-config settings that grant key on backend.
func (p *Policy) settings(backend, key string) string {
	if p == nil || backend == "" || p.grantKey(backend) == "" {
		return "policy." + key
	}
	return fmt.Sprintf("policy.%s or policy.backends.%s.%s", key, backend, key)
}

// candidates are the backends a run may be placed on: those its spec
// names in `backends` that are configured (`remote` naming the SSH
// backends), otherwise every configured one.
func (p *Policy) candidates(prof schema.Profile) []string {
	if p == nil {
		return []string{""}
	}
	var out []string
	for _, b := range p.env.Backends {
		if slices.Contains(prof.Backends, b) || (slices.Contains(prof.Backends, "remote") && slices.Contains(p.env.RemoteBackends, b)) {
			out = append(out, b)
		}
	}
	if len(out) == 0 {
		out = p.env.Backends
	}
	if len(out) == 0 {
		out = []string{""}
	}
	return out
}

// Check reviews one resource against the policy (a reconciler.Check): its
// instance volumes and `privileged`, on every backend the run may
// be placed on. Resources other than runs pass.
func (p *Policy) Check(r *schema.Resource) schema.Errors {
	rc := r.RunConfig()
	if rc == nil {
		return nil
	}
	var groups []schema.ReplicaGroup
	if s, ok := r.Spec.(*schema.Service); ok {
		groups = s.Groups
	}
	bes := p.candidates(rc.Profile)
	var errs schema.Errors
	for i, m := range rc.Volumes {
		if m.InstancePath == "" {
			continue
		}
		for _, b := range bes {
			if acc := p.InstanceVolume(b, m.InstancePath); !acc.Allowed {
				errs = append(errs, r.FieldError(fmt.Sprintf("volumes[%d]", i), "%s", acc.Reason))
				break
			}
		}
	}
	boolField := func(path string, set bool, allowed func(string) bool, what, key string) {
		if !set {
			return
		}
		for _, b := range bes {
			if !allowed(b) {
				errs = append(errs, r.FieldError(path, "%s are not allowed on backend %s: allow them with %s in the server config",
					what, b, p.settings(b, key)))
				return
			}
		}
	}
	boolField("privileged", rc.Privileged, p.Privileged, "privileged containers", "privileged")
	for i, g := range groups {
		boolField(fmt.Sprintf("replicas[%d].privileged", i), g.Privileged != nil && *g.Privileged, p.Privileged, "privileged containers", "privileged")
	}
	return append(errs, p.checkPods(r, rc, bes)...)
}

// numericUser is a user a pod can run as: uid or uid:gid.
var numericUser = regexp.MustCompile(`^[0-9]+(:[0-9]+)?$`)

// checkPods refuses, when a run may be placed on a backend whose jobs run
// as pods, what such a pod cannot do: run the image's own entrypoint (a
// task or service without `commands` or `entrypoint`), or run as a user
// named, not numbered.
func (p *Policy) checkPods(r *schema.Resource, rc *schema.RunConfig, bes []string) schema.Errors {
	if p == nil {
		return nil
	}
	pod := ""
	for _, b := range bes {
		if slices.Contains(p.env.PodBackends, b) {
			pod = b
			break
		}
	}
	if pod == "" {
		return nil
	}
	var errs schema.Errors
	hasCommands := true
	switch s := r.Spec.(type) {
	case *schema.Task:
		hasCommands = len(s.Commands) > 0
		for _, g := range s.Groups {
			hasCommands = hasCommands || len(g.Commands) > 0
		}
	case *schema.Service:
		hasCommands = len(s.Commands) > 0
		for _, g := range s.Groups {
			hasCommands = hasCommands || len(g.Commands) > 0
		}
	}
	if !hasCommands && rc.Entrypoint == "" {
		errs = append(errs, r.FieldError("commands", "a run that may be placed on backend %s needs `commands` or `entrypoint`: "+
			"its jobs run as pods, where the image's own entrypoint is not known; or name other backends in `backends`", pod))
	}
	if rc.User != "" && !numericUser.MatchString(rc.User) {
		errs = append(errs, r.FieldError("user", "%q: on backend %s a job runs as a numeric user id (uid or uid:gid); or name other backends in `backends`", rc.User, pod))
	}
	return errs
}

// ResolveSymlinks resolves the symbolic links of an absolute path on this
// machine. A path that does not exist yet resolves through its longest
// existing ancestor (Docker creates a missing bind-mount source); a
// symbolic link that cannot be resolved (dangling, a loop) is an error, as
// Docker would follow it somewhere unchecked.
func ResolveSymlinks(path string) (string, error) {
	cur, rest := filepath.Clean(path), ""
	for {
		r, err := filepath.EvalSymlinks(cur)
		if err == nil {
			return filepath.Join(r, rest), nil
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return "", err
		}
		if _, lerr := os.Lstat(cur); lerr == nil {
			return "", err // it exists, yet does not resolve: a dangling link
		}
		parent := filepath.Dir(cur)
		if parent == cur {
			return "", err
		}
		rest = filepath.Join(filepath.Base(cur), rest)
		cur = parent
	}
}
