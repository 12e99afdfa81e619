package reconciler

import (
	"slices"
	"testing"

	"hoist/schema"
)

// TestInterpolateNodeIPs replaces `${{ groups[i].nodes[j].IP_ADDRESS }}`
// in a task's commands by the IP of that node (job numbers counting
// through the groups in order), as dstack's server does.
func TestInterpolateNodeIPs(t *testing.T) {
	groups := runSpec{Type: "task", Groups: []schema.NodeGroup{{Name: "a", Nodes: 1}, {Name: "b", Nodes: 2}}}
	ips := []string{"10.0.0.1", "10.0.0.2", "10.0.0.3"}
	for _, tc := range []struct {
		name    string
		spec    runSpec
		ips     []string
		cmd     string
		want    string
		wantErr bool
	}{
		{"a node of a later group", groups, ips, "ping ${{ groups[1].nodes[1].IP_ADDRESS }}", "ping 10.0.0.3", false},
		{"every reference, with or without spaces", groups, ips,
			"${{groups[0].nodes[0].IP_ADDRESS}}:${{ groups[1].nodes[0].IP_ADDRESS }}", "10.0.0.1:10.0.0.2", false},
		{"the $${{ escape stays as written", groups, ips,
			"echo $${{ groups[0].nodes[0].IP_ADDRESS }}", "echo $${{ groups[0].nodes[0].IP_ADDRESS }}", false},
		{"a task of nodes is one group", runSpec{Type: "task", Nodes: 2}, ips[:2], "${{ groups[0].nodes[1].IP_ADDRESS }}", "10.0.0.2", false},
		{"a reference out of range fails", groups, ips, "${{ groups[0].nodes[1].IP_ADDRESS }}", "", true},
		{"a node without an IP fails", runSpec{Type: "task", Nodes: 1}, []string{""}, "${{ groups[0].nodes[0].IP_ADDRESS }}", "", true},
		{"other kinds' commands are left alone", runSpec{Type: "service"}, nil, "${{ groups[0].nodes[0].IP_ADDRESS }}", "${{ groups[0].nodes[0].IP_ADDRESS }}", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.spec.interpolateNodeIPs([]string{tc.cmd, "plain"}, tc.ips)
			if tc.wantErr {
				if err == nil {
					t.Errorf("interpolateNodeIPs = %q, want an error", got)
				}
				return
			}
			if err != nil || !slices.Equal(got, []string{tc.want, "plain"}) {
				t.Errorf("interpolateNodeIPs = %q, %v; want [%q plain]", got, err, tc.want)
			}
		})
	}
}

// TestRunSpecForJob gives each job of a task with groups its group's
// commands, resources and ports, job numbers counting through the groups
// in order.
func TestRunSpecForJob(t *testing.T) {
	gpu := schema.Resources{GPU: schema.GPU{Count: schema.Range{Min: new(float64(1))}}}
	s := runSpec{Type: "task", Commands: nil, Groups: []schema.NodeGroup{
		{Name: "head", Nodes: 1, Resources: gpu, Commands: []string{"head"}, Ports: []schema.PortMapping{{ContainerPort: 80}}},
		{Name: "workers", Nodes: 2, Commands: []string{"work"}},
	}}
	if n := s.nodeCount(); n != 3 {
		t.Fatalf("nodeCount = %d, want 3", n)
	}
	for num, want := range []string{"head", "work", "work"} {
		j := s.forJob(num)
		if !slices.Equal(j.Commands, []string{want}) || (taskGPUs(j) == 1) != (num == 0) || (len(j.Ports) == 1) != (num == 0) {
			t.Errorf("job %d runs %v with %d GPUs and ports %v, want group %s's", num, j.Commands, taskGPUs(j), j.Ports, want)
		}
		if again := j.forJob(0); !slices.Equal(again.Commands, []string{"head"}) {
			t.Errorf("forJob(0) of job %d's spec = %v, want head's", num, again.Commands)
		}
	}
}
