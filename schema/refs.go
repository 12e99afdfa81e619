package schema

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// dstack interpolates `${{ groups[i].nodes[j].IP_ADDRESS }}` (tasks) and
// `${{ groups[i].replicas[j].IP_ADDRESS }}` (services) in commands and
// rejects malformed, misplaced and out-of-range references at submit time.

var (
	anyRefRE       = regexp.MustCompile(`\$\{\{\s*([^}]+?)\s*\}\}`)
	groupsIPNameRE = regexp.MustCompile(`^groups\[(\d+)\]\.(nodes|replicas)\[(\d+)\]\.IP_ADDRESS$`)
)

type groupsRef struct {
	name          string
	group, index  int
	member        string
	wellFormed    bool
	groupsRootRef bool
}

// groupsRefs finds the `${{ groups... }}` references in s, skipping `$${{`
// escapes.
func groupsRefs(s string) []groupsRef {
	var out []groupsRef
	for _, m := range anyRefRE.FindAllStringSubmatchIndex(s, -1) {
		if m[0] > 0 && s[m[0]-1] == '$' {
			continue
		}
		name := strings.TrimSpace(s[m[2]:m[3]])
		root := name
		if i := strings.IndexAny(root, ".["); i >= 0 {
			root = root[:i]
		}
		if strings.TrimSpace(root) != "groups" {
			continue
		}
		r := groupsRef{name: name, groupsRootRef: true}
		if sm := groupsIPNameRE.FindStringSubmatch(name); sm != nil {
			r.wellFormed = true
			r.group, _ = strconv.Atoi(sm[1])
			r.member = sm[2]
			r.index, _ = strconv.Atoi(sm[3])
		}
		out = append(out, r)
	}
	return out
}

// checkGroupsRefs validates references in command nodes. member is "nodes"
// for tasks, "replicas" for services and "" for dev environments (syntax
// only); sizes are the group sizes.
func (d *dec) checkGroupsRefs(cmds []*node, paths []string, member string, sizes []int) {
	for i, c := range cmds {
		if c == nil || c.kind != nString {
			continue
		}
		for _, r := range groupsRefs(c.str) {
			switch {
			case !r.wellFormed:
				d.errf(c, paths[i], "illegal reference name: %s", r.name)
			case member == "":
			case r.member != member:
				d.errf(c, paths[i], "illegal reference name: groups[%d].%s[%d].IP_ADDRESS", r.group, r.member, r.index)
			case r.group >= len(sizes) || r.index >= sizes[r.group]:
				if member == "replicas" && r.group < len(sizes) && sizes[r.group] == 0 {
					d.errf(c, paths[i], "invalid reference groups[%d].replicas[%d].IP_ADDRESS: this group scales to zero, so no replica is guaranteed at start", r.group, r.index)
				} else {
					d.errf(c, paths[i], "invalid reference groups[%d].%s[%d].IP_ADDRESS: out of range", r.group, r.member, r.index)
				}
			}
		}
	}
}

// checkEnvGroupsRefs rejects groups references in env values.
func (d *dec) checkEnvGroupsRefs(envN *node, env []EnvVar) {
	for _, e := range env {
		if len(groupsRefs(e.Value)) > 0 {
			at := envN
			if envN != nil && envN.kind == nMap {
				if v := envN.get(e.Name); v != nil {
					at = v
				}
			} else if envN != nil && envN.kind == nList {
				for _, it := range envN.items {
					if it.kind == nString && strings.HasPrefix(it.str, e.Name+"=") {
						at = it
					}
				}
			}
			d.errf(at, "env", "groups IP references are only supported in commands, not in `env`")
		}
	}
}

// commandNodes lists the items of a commands list with their paths.
func commandNodes(list *node, path string) ([]*node, []string) {
	if list == nil || list.kind != nList {
		return nil, nil
	}
	paths := make([]string, len(list.items))
	for i := range list.items {
		paths[i] = fmt.Sprintf("%s[%d]", path, i)
	}
	return list.items, paths
}

// validRefName mirrors dstack's VariablesInterpolator.validate_name:
// exactly one dot, both parts starting with a letter or '_', then letters,
// digits, '_' and '.'.
func validRefName(s string) bool {
	dot := strings.IndexByte(s, '.')
	if strings.Count(s, ".") != 1 || dot <= 0 || dot >= len(s)-1 {
		return false
	}
	first := func(c byte) bool { return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }
	if !first(s[0]) || !first(s[dot+1]) {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !first(c) && !(c >= '0' && c <= '9') && c != '.' {
			return false
		}
	}
	return true
}

// checkInterpolation mirrors how `dstack apply` interpolates `${{ ... }}`
// in a string before submitting: `$$` escapes, secrets and groups
// references are left for later (but must be well-formed), and any other
// name must be one of vars.
func checkInterpolation(s string, vars map[string]bool) error {
	var missing []string
	start := 0
	for start < len(s) {
		dollar := strings.IndexByte(s[start:], '$')
		if dollar < 0 {
			break
		}
		dollar += start
		if dollar == len(s)-1 {
			break
		}
		if s[dollar+1] == '$' {
			start = dollar + 2
			continue
		}
		opening := strings.Index(s[start:], "${{")
		if opening < 0 {
			break
		}
		opening += start
		closing := strings.Index(s[opening:], "}}")
		if closing < 0 {
			return fmt.Errorf("no pattern closing: %s", s[opening:])
		}
		closing += opening
		name := strings.TrimSpace(s[opening+3 : closing])
		root := name
		if i := strings.IndexAny(root, ".["); i >= 0 {
			root = root[:i]
		}
		switch {
		case root == "secrets":
			if !validRefName(name) {
				return fmt.Errorf("illegal reference name: %s", name)
			}
		case root == "groups":
			if !groupsIPNameRE.MatchString(name) {
				return fmt.Errorf("illegal reference name: %s", name)
			}
		case !validRefName(name):
			return fmt.Errorf("illegal reference name: %s", name)
		case !vars[name]:
			missing = append(missing, name)
		}
		start = closing + 2
	}
	if len(missing) > 0 {
		return fmt.Errorf("failed to interpolate due to missing vars: %s", strings.Join(missing, ", "))
	}
	return nil
}

// checkCommandsInterpolation applies the check to command nodes, where
// only ${{ run.args }} is defined.
func (d *dec) checkCommandsInterpolation(cmds []*node, paths []string) {
	vars := map[string]bool{"run.args": true}
	for i, c := range cmds {
		if c != nil && c.kind == nString {
			if err := checkInterpolation(c.str, vars); err != nil {
				d.errf(c, paths[i], "%v", err)
			}
		}
	}
}

// checkEnvInterpolation checks registry_auth and probe fields, where the
// run's env variables are defined as ${{ env.NAME }}.
func (d *dec) checkEnvInterpolation(n *node, env []EnvVar) {
	vars := map[string]bool{}
	for _, e := range env {
		vars["env."+e.Name] = true
	}
	check := func(v *node, path string) {
		if v != nil && v.kind == nString {
			if err := checkInterpolation(v.str, vars); err != nil {
				d.errf(v, path, "%v", err)
			}
		}
	}
	if ra := n.get("registry_auth"); ra != nil && ra.kind == nMap {
		check(ra.get("username"), "registry_auth.username")
		check(ra.get("password"), "registry_auth.password")
	}
	if pr := n.get("probes"); pr != nil && pr.kind == nList {
		for i, p := range pr.items {
			if p.kind != nMap {
				continue
			}
			pp := idx("probes", i)
			check(p.get("url"), pp+".url")
			check(p.get("body"), pp+".body")
			if hs := p.get("headers"); hs != nil && hs.kind == nList {
				for j, h := range hs.items {
					if h.kind == nMap {
						check(h.get("value"), idx(pp+".headers", j)+".value")
					}
				}
			}
		}
	}
}
