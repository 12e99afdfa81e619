package reconciler

import (
	"fmt"
	"regexp"
	"strconv"

	"hoist/schema"
)

// nodesIPRefRE is a reference to a node's IP in a task's commands,
// `${{ groups[i].nodes[j].IP_ADDRESS }}` (dstack's
// utils/nodes_interpolator.py, _NODES_IP_REF). One right after a `$` is
// the `$${{` escape and stays as written.
var nodesIPRefRE = regexp.MustCompile(`\$\{\{\s*groups\[(\d+)\]\.nodes\[(\d+)\]\.IP_ADDRESS\s*\}\}`)

// groupSizes is the number of nodes of each group of a task: its groups',
// or one group of all its nodes (dstack's node_groups of a `nodes: N`
// task).
func (s runSpec) groupSizes() []int {
	if len(s.Groups) == 0 {
		return []int{s.nodeCount()}
	}
	sizes := make([]int, len(s.Groups))
	for i, g := range s.Groups {
		sizes[i] = g.Nodes
	}
	return sizes
}

// interpolateNodeIPs replaces the node IP references in a task's commands
// by the internal IPs of those nodes, ips being the IPs of the task's
// nodes in job number order (the cluster's NodesIPs), as dstack's server
// does before it submits the job (jobs_running.py,
// _substitute_groups_ip_refs). A reference out of range, or to a node
// whose IP is unknown, is an error: the job cannot start. The commands of
// other kinds are returned as they are.
func (s runSpec) interpolateNodeIPs(cmds []string, ips []string) ([]string, error) {
	if schema.Kind(s.Type) != schema.KindTask {
		return cmds, nil
	}
	sizes := s.groupSizes()
	out := make([]string, len(cmds))
	for k, c := range cmds {
		var b []byte
		last := 0
		for _, m := range nodesIPRefRE.FindAllStringSubmatchIndex(c, -1) {
			if m[0] > 0 && c[m[0]-1] == '$' {
				continue // the $${{ escape
			}
			g, _ := strconv.Atoi(c[m[2]:m[3]])
			i, _ := strconv.Atoi(c[m[4]:m[5]])
			if g >= len(sizes) || i >= sizes[g] {
				return nil, fmt.Errorf("invalid reference groups[%d].nodes[%d].IP_ADDRESS: out of range", g, i)
			}
			num := i
			for _, n := range sizes[:g] {
				num += n
			}
			if num >= len(ips) || ips[num] == "" {
				return nil, fmt.Errorf("IP not available for groups[%d].nodes[%d].IP_ADDRESS", g, i)
			}
			b = append(append(b, c[last:m[0]]...), ips[num]...)
			last = m[1]
		}
		if b == nil {
			out[k] = c
			continue
		}
		out[k] = string(append(b, c[last:]...))
	}
	return out, nil
}
