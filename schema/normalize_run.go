package schema

import (
	"fmt"
	"strings"
)

func (d *dec) ports(n *node, path string) []PortMapping {
	if n.isNull() {
		return nil
	}
	if n.kind != nList {
		d.errf(n, path, "expected a list, got %s", n.describe())
		return nil
	}
	var out []PortMapping
	for i, it := range n.items {
		if it.kind == nFloat {
			// dstack's shorthand takes ints and strings only here.
			d.errf(it, idx(path, i), "expected a port mapping, got float")
			continue
		}
		if pm, ok := d.port(it, idx(path, i)); ok {
			out = append(out, pm)
		}
	}
	return out
}

func (d *dec) port(n *node, path string) (PortMapping, bool) {
	switch n.kind {
	case nInt, nBool, nFloat:
		p, ok := d.portNum(n, path)
		if !ok {
			return PortMapping{}, false
		}
		return PortMapping{LocalPort: &p, ContainerPort: p}, true
	case nString:
		pm, err := ParsePort(n.str)
		if err != nil {
			d.errf(n, path, "%v", err)
			return PortMapping{}, false
		}
		return pm, true
	case nMap:
		if !d.object(n, path, fieldsAt("#Port")...) {
			return PortMapping{}, false
		}
		var pm PortMapping
		cp := n.get("container_port")
		if cp.isNull() {
			d.errf(n, path, "field \"container_port\" is required")
			return PortMapping{}, false
		}
		v, ok := d.portNum(cp, join(path, "container_port"))
		if !ok {
			return PortMapping{}, false
		}
		pm.ContainerPort = v
		if lp := n.get("local_port"); !lp.isNull() {
			v, ok := d.portNum(lp, join(path, "local_port"))
			if !ok {
				return PortMapping{}, false
			}
			pm.LocalPort = &v
		}
		return pm, true
	}
	d.errf(n, path, "expected a port mapping, got %s", n.describe())
	return PortMapping{}, false
}

func (d *dec) portNum(n *node, path string) (int, bool) {
	v, ok := d.integer(n, path)
	if !ok {
		return 0, false
	}
	if v < 1 || v > 65535 {
		d.errf(n, path, "invalid port %d: must be between 1 and 65535", v)
		return 0, false
	}
	return int(v), true
}

func (d *dec) volumes(n *node, path string) []MountPoint {
	if n.isNull() {
		return nil
	}
	if n.kind != nList {
		d.errf(n, path, "expected a list, got %s", n.describe())
		return nil
	}
	var out []MountPoint
	for i, it := range n.items {
		p := idx(path, i)
		switch it.kind {
		case nString:
			mp, err := ParseMountPoint(it.str)
			if err == nil && len(mp.Name) > 0 {
				err = checkVolumeNameRefs(mp.Name[0])
			}
			if err != nil {
				d.errf(it, p, "%v", err)
				continue
			}
			out = append(out, mp)
		case nMap:
			if it.has("instance_path") {
				if !d.object(it, p, fieldsAt("#MountPoint{instance_path}")...) {
					continue
				}
				ip := d.mountPath(it, p, "instance_path")
				pp := d.mountPath(it, p, "path")
				opt := d.optBool(it.get("optional"), join(p, "optional"), false)
				if ip != "" && pp != "" {
					out = append(out, MountPoint{InstancePath: ip, Path: pp, Optional: opt})
				}
				continue
			}
			// `optional` is accepted here too: dstack's docs show it on the
			// object form (guides/protips.md), though its model rejects it.
			if !d.object(it, p, fieldsAt("#MountPoint{name}")...) {
				continue
			}
			nm := it.get("name")
			var names []string
			switch {
			case nm.isNull():
				d.errf(it, p, "field \"name\" is required")
				continue
			case nm.kind == nList:
				names = d.strList(nm, join(p, "name"))
			default:
				if s, ok := d.str(nm, join(p, "name")); ok {
					names = []string{s}
				}
			}
			if !d.volumeNameRefs(nm, join(p, "name")) {
				continue
			}
			pp := d.mountPath(it, p, "path")
			opt := d.optBool(it.get("optional"), join(p, "optional"), false)
			if pp != "" && names != nil {
				out = append(out, MountPoint{Name: names, Path: pp, Optional: opt})
			}
		default:
			d.errf(it, p, "expected a mount point, got %s", it.describe())
		}
	}
	return out
}

// volumeNameRefs checks the interpolations in a mount's name node (a
// string or a list of them), reporting each bad one; false if any is.
func (d *dec) volumeNameRefs(nm *node, path string) bool {
	ok := true
	check := func(n *node, path string) {
		if n.kind != nString {
			return
		}
		if err := checkVolumeNameRefs(n.str); err != nil {
			d.errf(n, path, "%v", err)
			ok = false
		}
	}
	if nm.kind == nList {
		for i, it := range nm.items {
			check(it, idx(path, i))
		}
	} else {
		check(nm, path)
	}
	return ok
}

func (d *dec) mountPath(n *node, path, key string) string {
	v := n.get(key)
	if v.isNull() {
		d.errf(n, path, "field %q is required", key)
		return ""
	}
	s, ok := d.str(v, join(path, key))
	if !ok {
		return ""
	}
	c, err := CleanMountPath(s)
	if err != nil {
		d.errf(v, join(path, key), "%v", err)
		return ""
	}
	return c
}

func (d *dec) python(n *node, path string) string {
	if n.isNull() {
		return ""
	}
	var s string
	switch n.kind {
	case nFloat:
		s = pyFloat(n.f)
		if s == "3.1" {
			s = "3.10"
		}
	case nString:
		s = n.str
	default:
		d.errf(n, path, "invalid python version %s: must be one of %s", n.scalarText(), quoteList(valuesAt("#Python")))
		return ""
	}
	if !contains(valuesAt("#Python"), s) {
		d.errf(n, path, "invalid python version %q: must be one of %s", s, quoteList(valuesAt("#Python")))
		return ""
	}
	return s
}

func (d *dec) commands(n *node, path string) []string {
	return d.strList(n, path)
}

// runConfig decodes the fields shared by the run kinds.
func (d *dec) runConfig(n *node, kind Kind) RunConfig {
	rc := RunConfig{
		Name:       d.optStr(n.get("name"), "name"),
		Image:      d.optStr(n.get("image"), "image"),
		User:       d.optStr(n.get("user"), "user"),
		Privileged: d.optBool(n.get("privileged"), "privileged", false),
		Entrypoint: d.optStr(n.get("entrypoint"), "entrypoint"),
		WorkingDir: d.optStr(n.get("working_dir"), "working_dir"),
		Python:     d.python(n.get("python"), "python"),
		NVCC:       d.optBool(n.get("nvcc"), "nvcc", false),
		Docker:     d.optBool(n.get("docker"), "docker", false),
		Env:        d.env(n.get("env"), "env"),
		Shell:      d.optStr(n.get("shell"), "shell"),
		Resources:  d.resources(n.get("resources"), "resources"),
		Volumes:    d.volumes(n.get("volumes"), "volumes"),
		Dstack:     d.optBool(n.get("dstack"), "dstack", false),
		Setup:      d.strList(n.get("setup"), "setup"),
		Profile:    d.profile(n, DefaultRunIdleDuration),
	}
	if v := n.get("home_dir"); !v.isNull() {
		d.str(v, "home_dir")
	}
	if v := n.get("single_branch"); !v.isNull() {
		if b, ok := d.boolean(v, "single_branch"); ok {
			rc.SingleBranch = &b
		}
	}
	if v := n.get("python"); !v.isNull() && rc.Image != "" {
		d.errf(v, "python", "`image` and `python` are mutually exclusive fields")
	}
	// dstack only checks a literal `true` here (`docker: 1` slips through).
	if v := n.get("docker"); v != nil && v.kind == nBool && v.b {
		switch {
		case rc.Image != "":
			d.errf(v, "docker", "`image` and `docker` are mutually exclusive fields")
		case rc.Python != "":
			d.errf(v, "docker", "`python` and `docker` are mutually exclusive fields")
		case rc.NVCC:
			d.errf(v, "docker", "`nvcc` and `docker` are mutually exclusive fields")
		}
	}
	if v := n.get("working_dir"); !v.isNull() && rc.WorkingDir != "" && !strings.HasPrefix(rc.WorkingDir, "/") {
		// `dstack apply` rejects it before submitting.
		d.errf(v, "working_dir", "working_dir must be absolute")
	}
	if v := n.get("user"); !v.isNull() {
		if err := validateUnixUser(rc.User); err != nil {
			d.errf(v, "user", "%v", err)
		}
	}
	if v := n.get("shell"); !v.isNull() && rc.Shell != "sh" && rc.Shell != "bash" && !strings.HasPrefix(rc.Shell, "/") {
		d.errf(v, "shell", "the value must be `sh`, `bash`, or an absolute path")
	}
	if v := n.get("priority"); !v.isNull() {
		if x, ok := d.integer(v, "priority"); ok {
			if x < 0 || x > 100 {
				d.errf(v, "priority", "must be between 0 and 100")
			}
			rc.Priority = int(x)
		}
	}
	if v := n.get("registry_auth"); !v.isNull() && d.object(v, "registry_auth", fieldsAt("#Run.registry_auth")...) {
		ra := &RegistryAuth{}
		ok := true
		for _, f := range []struct {
			key string
			dst *string
		}{{"username", &ra.Username}, {"password", &ra.Password}} {
			x := v.get(f.key)
			if x.isNull() {
				d.errf(v, "registry_auth", "field %q is required", f.key)
				ok = false
				continue
			}
			*f.dst, _ = d.str(x, join("registry_auth", f.key))
		}
		if ok {
			rc.RegistryAuth = ra
		}
	}
	if v := n.get("repos"); !v.isNull() {
		rc.Repos = d.repos(v, "repos")
	}
	if v := n.get("files"); !v.isNull() {
		rc.Files = d.files(v, "files")
	}
	for i, mp := range rc.Volumes {
		if !validDockerTarget(mp.Path) {
			d.errf(n.get("volumes").items[min(i, len(n.get("volumes").items)-1)], idx("volumes", i), "invalid volume mount path: %s", mp.Path)
		}
	}
	return rc
}

// validDockerTarget mirrors dstack's check of a container mount path
// (already cleaned: absolute, no trailing slash).
func validDockerTarget(p string) bool {
	return strings.HasPrefix(p, "/") && !strings.ContainsRune(p, 0)
}

// validateUnixUser mirrors dstack's `user[:group]` parser: names or ids,
// ids not negative, no empty parts.
func validateUnixUser(u string) error {
	parts := strings.Split(u, ":")
	if len(parts) > 2 {
		return fmt.Errorf("invalid user format: too many parts")
	}
	for i, p := range parts {
		what := [...]string{"user", "group"}[i]
		if p == "" {
			return fmt.Errorf("invalid user format: empty %s name or id", what)
		}
		if id, err := parseInt(p); err == nil && id < 0 {
			return fmt.Errorf("invalid user format: negative %cid %d", what[0], id)
		}
	}
	return nil
}

func (d *dec) repos(n *node, path string) []Repo {
	if n.kind != nList {
		d.errf(n, path, "expected a list, got %s", n.describe())
		return nil
	}
	var out []Repo
	for i, it := range n.items {
		p := idx(path, i)
		var r Repo
		switch it.kind {
		case nString:
			var err error
			r, err = ParseRepo(it.str)
			if err != nil {
				d.errf(it, p, "%v", err)
				continue
			}
		case nMap:
			if !d.object(it, p, fieldsAt("#Repo")...) {
				continue
			}
			r = Repo{
				LocalPath: d.optStr(it.get("local_path"), join(p, "local_path")),
				URL:       d.optStr(it.get("url"), join(p, "url")),
				Branch:    d.optStr(it.get("branch"), join(p, "branch")),
				Hash:      d.optStr(it.get("hash"), join(p, "hash")),
				Path:      ".",
				IfExists:  "error",
			}
			if v := it.get("path"); !v.isNull() {
				r.Path, _ = d.str(v, join(p, "path"))
			}
			if v := it.get("if_exists"); !v.isNull() {
				if s, ok := d.enum(v, join(p, "if_exists"), valuesAt("#Repo.if_exists")...); ok {
					r.IfExists = s
				}
			}
		default:
			d.errf(it, p, "expected a repo, got %s", it.describe())
			continue
		}
		if r.LocalPath != "" && r.URL != "" {
			d.errf(it, p, "`local_path` and `url` are mutually exclusive")
			continue
		}
		if r.LocalPath == "" && r.URL == "" {
			d.errf(it, p, "either `local_path` or `url` must be specified")
			continue
		}
		if strings.HasPrefix(r.Path, "~") && !(r.Path == "~" || strings.HasPrefix(r.Path, "~/")) {
			d.errf(it, p, "`~username` syntax is not supported")
			continue
		}
		out = append(out, r)
	}
	if len(n.items) > 1 {
		d.errf(n.items[1], path, "a maximum of one repo is currently supported")
	}
	return out
}

func (d *dec) files(n *node, path string) []FileMapping {
	if n.kind != nList {
		d.errf(n, path, "expected a list, got %s", n.describe())
		return nil
	}
	var out []FileMapping
	for i, it := range n.items {
		p := idx(path, i)
		switch it.kind {
		case nString:
			fm, err := ParseFileMapping(it.str)
			if err != nil {
				d.errf(it, p, "%v", err)
				continue
			}
			out = append(out, fm)
		case nMap:
			if !d.object(it, p, fieldsAt("#File")...) {
				continue
			}
			lp, pp := it.get("local_path"), it.get("path")
			if lp.isNull() || pp.isNull() {
				d.errf(it, p, "fields \"local_path\" and \"path\" are required")
				continue
			}
			l, ok1 := d.str(lp, join(p, "local_path"))
			q, ok2 := d.str(pp, join(p, "path"))
			if ok1 && ok2 {
				if isWindowsAbs(q) {
					d.errf(pp, join(p, "path"), "path must be a Unix file path: %s", q)
					continue
				}
				out = append(out, FileMapping{LocalPath: l, Path: q})
			}
		default:
			d.errf(it, p, "expected a file mapping, got %s", it.describe())
		}
	}
	return out
}

// requireCommandsOrImage reports a missing `commands`/`image` pair.
func (d *dec) requireCommandsOrImage(n *node, commands []string, image string) {
	if len(commands) == 0 && image == "" {
		d.errf(n, "", "either `commands` or `image` must be set")
	}
}
