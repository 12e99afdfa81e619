package schema

import (
	"fmt"
)

func (d *dec) task(n *node) *Task {
	t := &Task{RunConfig: d.runConfig(n, KindTask)}
	t.Commands = d.commands(n.get("commands"), "commands")
	t.Ports = d.ports(n.get("ports"), "ports")
	nodesN, groupsN := n.get("nodes"), n.get("groups")
	if !nodesN.isNull() && !groupsN.isNull() {
		d.errf(groupsN, "groups", "`nodes` and `groups` are mutually exclusive")
	}
	t.Nodes = 1
	if !nodesN.isNull() {
		if x, ok := d.integer(nodesN, "nodes"); ok {
			if x < 1 {
				d.errf(nodesN, "nodes", "must be greater than or equal to 1")
			}
			t.Nodes = int(x)
		}
	}
	if !groupsN.isNull() {
		t.Nodes = 0
		t.Groups = d.nodeGroups(groupsN, "groups", t.Image)
		if len(t.Commands) > 0 {
			d.errf(n.get("commands"), "commands", "top-level `commands` is not allowed when `groups` is set; specify `commands` in each node group instead")
		}
		if len(t.Ports) > 0 {
			d.errf(n.get("ports"), "ports", "top-level `ports` is not allowed when `groups` is set; specify `ports` in each node group instead")
		}
		if v := n.get("entrypoint"); !v.isNull() {
			d.errf(v, "entrypoint", "top-level `entrypoint` is not allowed when `groups` is set; specify `commands` in each node group instead")
		}
		for i := range t.Groups {
			inferGPUVendor(&t.Groups[i].Resources.GPU, t.Image, t.Docker)
		}
	} else {
		d.requireCommandsOrImage(n, t.Commands, t.Image)
	}
	inferGPUVendor(&t.Resources.GPU, t.Image, t.Docker)
	if t.Groups == nil {
		d.checkImageCompat(resourcesAt(n, "gpu"), resourcesAt(n, "cpu"), "resources", t.Resources, t.Image, t.Docker)
	} else {
		for i, g := range t.Groups {
			if i < len(groupsN.items) {
				d.checkImageCompat(groupsN.items[i], groupsN.items[i], idx("groups", i), g.Resources, t.Image, t.Docker)
			}
		}
	}
	d.checkEnvGroupsRefs(n.get("env"), t.Env)
	if t.Groups != nil {
		var sizes []int
		for _, g := range t.Groups {
			sizes = append(sizes, g.Nodes)
		}
		for i, it := range groupsN.items {
			if i < len(t.Groups) {
				cmds, paths := commandNodes(it.get("commands"), idx("groups", i)+".commands")
				d.checkGroupsRefs(cmds, paths, "nodes", sizes)
				d.checkCommandsInterpolation(cmds, paths)
			}
		}
	} else {
		cmds, paths := commandNodes(n.get("commands"), "commands")
		d.checkGroupsRefs(cmds, paths, "nodes", []int{t.Nodes})
		d.checkCommandsInterpolation(cmds, paths)
	}
	d.checkEnvInterpolation(n, t.Env)
	return t
}

func (d *dec) nodeGroups(n *node, path, image string) []NodeGroup {
	if n.kind != nList {
		d.errf(n, path, "expected a list, got %s", n.describe())
		return nil
	}
	if len(n.items) == 0 {
		d.errf(n, path, "`groups` cannot be an empty list")
		return nil
	}
	var out []NodeGroup
	seen := map[string]bool{}
	for i, it := range n.items {
		p := idx(path, i)
		if !d.object(it, p, fieldsAt("#Task.groups[]")...) {
			continue
		}
		g := NodeGroup{Name: fmt.Sprint(i), Nodes: 1}
		if v := it.get("name"); !v.isNull() {
			if s, ok := d.str(v, join(p, "name")); ok {
				if !groupNameRE.MatchString(s) {
					d.errf(v, join(p, "name"), "node group name should match regex '^[a-z0-9][a-z0-9-]{0,39}$'")
				}
				g.Name = s
			}
		}
		if v := it.get("nodes"); !v.isNull() {
			if x, ok := d.integer(v, join(p, "nodes")); ok {
				if x < 1 {
					d.errf(v, join(p, "nodes"), "must be greater than or equal to 1")
				}
				g.Nodes = int(x)
			}
		}
		g.Resources = d.resources(it.get("resources"), join(p, "resources"))
		g.Commands = d.commands(it.get("commands"), join(p, "commands"))
		g.Ports = d.ports(it.get("ports"), join(p, "ports"))
		if seen[g.Name] {
			d.errf(it, p, "duplicate node group name %q: each node group must have a unique name", g.Name)
		}
		seen[g.Name] = true
		if len(g.Commands) == 0 && image == "" {
			d.errf(it, p, "node group '%s': either `commands` must be set in the group, or `image` at the task level", g.Name)
		}
		out = append(out, g)
	}
	return out
}
