package plan_test

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"testing/fstest"

	"hoist/reconciler/plan"
	"hoist/schema"
)

// TestCostsOf checks the one cost-per-hour computation: billed instances
// only, each once in the total, per fleet, and once per run however many
// of its jobs share an instance.
func TestCostsOf(t *testing.T) {
	insts := []plan.Instance{
		{Fleet: "gpu", Status: "busy", Price: 2, Runs: []string{"train", "train"}}, // two jobs of one run
		{Fleet: "gpu", Status: "idle", Price: 2},
		{Fleet: "gpu", Status: "provisioning", Price: 2},
		{Fleet: "gpu", Status: "pending", Price: 2},    // not created yet
		{Fleet: "gpu", Status: "terminated", Price: 2}, // gone
		{Fleet: "byoh", Status: "busy", Price: 0, Runs: []string{"eval"}},
		{Fleet: "local", Status: "idle", Price: 0, Runs: []string{"a", "b"}},
		{Fleet: "spot", Status: "terminating", Price: 0.5, Runs: []string{"a", "b"}}, // shared
	}
	c := plan.CostsOf(insts)
	if c.Total != 6.5 {
		t.Errorf("total = %v, want 6.5 (three gpu instances and the draining spot one)", c.Total)
	}
	if c.Fleets["gpu"] != 6 || c.Fleets["byoh"] != 0 || c.Fleets["spot"] != 0.5 {
		t.Errorf("fleets = %v", c.Fleets)
	}
	if c.Runs["train"] != 2 || c.Runs["eval"] != 0 || c.Runs["a"] != 0.5 || c.Runs["b"] != 0.5 {
		t.Errorf("runs = %v", c.Runs)
	}
}

// TestCurrentPrices: a fleet resource carries its billed instances; a run
// carries only instances of fleets that are not resources (no instance is
// counted twice), so the plan's before equals the spend per hour.
func TestCurrentPrices(t *testing.T) {
	cur := []plan.Current{
		{Kind: schema.KindFleet, Name: "gpu"},
		{Kind: schema.KindFleet, Name: "byoh"},
		{Kind: schema.KindTask, Name: "train"},
		{Kind: schema.KindTask, Name: "leftover"},
		{Kind: schema.KindVolume, Name: "data"},
	}
	insts := []plan.Instance{
		{Fleet: "gpu", Status: "busy", Price: 3, Runs: []string{"train"}},
		{Fleet: "gpu", Status: "idle", Price: 3},
		{Fleet: "byoh", Status: "busy", Runs: []string{"x"}},
		{Fleet: "removed", Status: "busy", Price: 1.25, Runs: []string{"leftover"}}, // fleet left Git, drains
	}
	plan.CurrentPrices(cur, insts)
	got := map[string]float64{}
	sum := 0.0
	for _, c := range cur {
		got[c.Name] = c.PricePerHour
		sum += c.PricePerHour
	}
	want := map[string]float64{"gpu": 6, "byoh": 0, "train": 0, "leftover": 1.25, "data": 0}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %v, want %v", k, got[k], v)
		}
	}
	if total := plan.CostsOf(insts).Total; sum != total {
		t.Errorf("sum over resources %v != spend per hour %v", sum, total)
	}
	p := plan.Compute(nil, plan.Observed{Resources: cur}, genNow, plan.Options{Confirmed: true})
	if p.CostBefore != plan.CostsOf(insts).Total {
		t.Errorf("plan before %v != spend per hour %v", p.CostBefore, plan.CostsOf(insts).Total)
	}
}

// prices is a Pricer over a fixed price list: $10 per GPU instance, $1 per
// CPU one; it records the backends each ask named.
type prices struct{ asked [][]string }

func (p *prices) price(res schema.Resources, prof schema.Profile) (float64, bool) {
	p.asked = append(p.asked, prof.Backends)
	if slices.Contains(prof.Backends, "vultr") {
		return 0, false
	}
	if res.GPU.Count.Min != nil && *res.GPU.Count.Min > 0 {
		return 10, true
	}
	return 1, true
}

const (
	sshFleet     = "type: fleet\nname: byoh\nssh_config:\n  user: u\n  identity_file: ~/.ssh/id\n  hosts: [10.0.0.1, 10.0.0.2]\n"
	fixedFleet   = "type: fleet\nname: fixed\nnodes: 2\nbackends: [aws]\nresources:\n  gpu: 1\n"
	minFleet     = "type: fleet\nname: pool\nnodes: 1..3\nbackends: [aws]\n"
	elasticFleet = "type: fleet\nname: elastic\nnodes: 0..2\nbackends: [aws]\n"
	clusterFleet = "type: fleet\nname: tightly\nnodes: 0..4\nplacement: cluster\nbackends: [gcp]\n"
)

// TestCompute_costAfter checks the estimate of a revision's spend, rule by
// rule.
func TestCompute_costAfter(t *testing.T) {
	for _, tc := range []struct {
		name  string
		files []string
		want  float64
		asked []string // backends the offers were asked for, when checked
	}{
		{"an SSH fleet and a task pinned to it cost nothing", []string{sshFleet,
			"type: task\nname: tt\ncommands: [x]\nfleets: [byoh]\nresources:\n  gpu: 1\n"}, 0, nil},
		{"a task on this host costs nothing", []string{"type: task\nname: tt\ncommands: [x]\n"}, 0, nil},
		{"a backend fleet costs nodes × its cheapest offer", []string{fixedFleet}, 20, []string{"aws"}},
		{"a fleet with nodes.min costs min × its cheapest offer", []string{minFleet}, 1, []string{"aws"}},
		{"a fleet that grows only for jobs costs nothing by itself", []string{elasticFleet}, 0, nil},
		{"a task on a fleet's kept nodes adds nothing", []string{fixedFleet,
			"type: task\nname: tt\ncommands: [x]\nfleets: [fixed]\nresources:\n  gpu: 1\n"}, 20, nil},
		{"a task on a growing fleet costs the offer it gets", []string{elasticFleet,
			"type: task\nname: tt\ncommands: [x]\nfleets: [elastic]\nresources:\n  gpu: 1\n"}, 10, []string{"aws"}},
		{"each node of a multi-node task gets an instance of a cluster fleet", []string{clusterFleet,
			"type: task\nname: tt\nnodes: 3\ncommands: [x]\nresources:\n  gpu: 1\n"}, 30, nil},
		{"a multi-node task takes no fleet without placement: cluster", []string{elasticFleet,
			"type: task\nname: tt\nnodes: 3\ncommands: [x]\nresources:\n  gpu: 1\n"}, 0, nil},
		{"a multi-node task grows the cluster fleet, not another that grows", []string{elasticFleet, clusterFleet,
			"type: task\nname: tt\nnodes: 2\ncommands: [x]\nresources:\n  gpu: 1\n"}, 20, []string{"gcp"}},
		{"no offer known: the estimate is left out", []string{
			"type: fleet\nname: far\nnodes: 2\nbackends: [vultr]\n"}, 0, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fsys := fstest.MapFS{}
			for i, f := range tc.files {
				fsys[fmt.Sprintf("f%d.dstack.yml", i)] = &fstest.MapFile{Data: []byte(f)}
			}
			d, err := schema.Load(fsys)
			if err != nil {
				t.Fatal(err)
			}
			pr := &prices{}
			p := plan.Compute(d.Resources, plan.Observed{}, genNow, plan.Options{Estimate: pr.price})
			if math.Abs(p.CostAfter-tc.want) > 1e-9 {
				t.Errorf("cost after = %v, want %v", p.CostAfter, tc.want)
			}
			if tc.asked != nil && !slices.ContainsFunc(pr.asked, func(b []string) bool { return slices.Equal(b, tc.asked) }) {
				t.Errorf("offers asked with backends %v, want %v", pr.asked, tc.asked)
			}
		})
	}
}

// TestCompute_unchangedPlanKeepsItsCost: what a plan keeps costs what it
// costs now, whatever the offers say, so an unchanged revision's before and
// after agree.
func TestCompute_unchangedPlanKeepsItsCost(t *testing.T) {
	d, err := schema.Load(fstest.MapFS{"a.dstack.yml": {Data: []byte(fixedFleet)}, "b.dstack.yml": {Data: []byte(sshFleet)}})
	if err != nil {
		t.Fatal(err)
	}
	var cur []plan.Current
	for _, r := range d.Resources {
		cur = append(cur, plan.Current{Kind: r.Kind, Name: r.Name, Spec: r.JSON})
	}
	plan.CurrentPrices(cur, []plan.Instance{
		{Fleet: "fixed", Status: "busy", Price: 12.5}, {Fleet: "fixed", Status: "idle", Price: 12.5},
	})
	pr := &prices{}
	p := plan.Compute(d.Resources, plan.Observed{Resources: cur}, genNow, plan.Options{Estimate: pr.price})
	if p.Changes() || p.CostBefore != 25 || p.CostAfter != 25 {
		t.Errorf("changes %v, before %v, after %v; want no changes and 25 → 25", p.Changes(), p.CostBefore, p.CostAfter)
	}
}

// TestCompute_fleetUpdateIsRepricedOnlyWhenItsPriceCanChange: a fleet
// whose tags change keeps its current cost; one whose nodes change is
// estimated anew.
func TestCompute_fleetUpdateIsRepricedOnlyWhenItsPriceCanChange(t *testing.T) {
	before := loadYAML(t, fixedFleet)
	for _, tc := range []struct {
		name, spec string
		want       float64
	}{
		{"tags", fixedFleet + "tags:\n  team: ml\n", 25},
		{"nodes", strings.Replace(fixedFleet, "nodes: 2", "nodes: 3", 1), 30},
	} {
		t.Run(tc.name, func(t *testing.T) {
			after := loadYAML(t, tc.spec)
			cur := plan.Current{Kind: schema.KindFleet, Name: "fixed", Spec: before.JSON, PricePerHour: 25}
			pr := &prices{}
			p := plan.Compute([]schema.Resource{after}, plan.Observed{Resources: []plan.Current{cur}}, genNow, plan.Options{Estimate: pr.price})
			if p.Steps[0].Action != plan.Update || p.CostAfter != tc.want {
				t.Errorf("%s: cost after %v, want %v", p.Steps[0].Action, p.CostAfter, tc.want)
			}
		})
	}
}

// TestCompute_multiNodeTaskCostIsNodesTimesPrice: a multi-node task's
// step says what its estimate is made of — its nodes times the price of
// the instance each gets — and the plan's spend after counts all of them.
func TestCompute_multiNodeTaskCostIsNodesTimesPrice(t *testing.T) {
	for _, tc := range []struct {
		name, task, want string
		after            float64
	}{
		{"GPU nodes", "type: task\nname: tt\nnodes: 3\ncommands: [x]\nresources:\n  gpu: 1\n", "3 nodes × $10/h = $30/h", 30},
		{"CPU nodes", "type: task\nname: tt\nnodes: 2\ncommands: [x]\n", "2 nodes × $1/h = $2/h", 2},
		{"one node", "type: task\nname: tt\ncommands: [x]\n", "", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, err := schema.Load(fstest.MapFS{"f.dstack.yml": {Data: []byte(clusterFleet)}, "t.dstack.yml": {Data: []byte(tc.task)}})
			if err != nil {
				t.Fatal(err)
			}
			pr := &prices{}
			p := plan.Compute(d.Resources, plan.Observed{}, genNow, plan.Options{Estimate: pr.price})
			i := slices.IndexFunc(p.Steps, func(s plan.Step) bool { return s.Name == "tt" })
			if p.Steps[i].Cost != tc.want || p.CostAfter != tc.after {
				t.Errorf("step cost %q, after %v; want %q and %v", p.Steps[i].Cost, p.CostAfter, tc.want, tc.after)
			}
		})
	}
}

// TestCostsOf_multiNodeRunCostsEveryNode: a multi-node run occupies one
// instance per node and costs all of them (the runs page's and the
// dashboard's cost per hour), nodes × price.
func TestCostsOf_multiNodeRunCostsEveryNode(t *testing.T) {
	c := plan.CostsOf([]plan.Instance{
		{Fleet: "cluster", Status: "busy", Price: 0.25, Runs: []string{"train"}},
		{Fleet: "cluster", Status: "busy", Price: 0.25, Runs: []string{"train"}},
		{Fleet: "cluster", Status: "busy", Price: 0.25, Runs: []string{"train"}},
	})
	if c.Runs["train"] != 0.75 || c.Total != 0.75 {
		t.Errorf("run costs %v of %v in all, want 3 × 0.25 = 0.75", c.Runs["train"], c.Total)
	}
}
