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
