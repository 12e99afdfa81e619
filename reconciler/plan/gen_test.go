package plan_test

import (
	"fmt"
	"slices"
	"strings"
	"testing/fstest"

	"pgregory.net/rapid"

	"hoist/reconciler/plan"
	"hoist/schema"
)

// specGen describes one spec by a few knobs, each 0..2, and writes it as
// YAML in one of two spellings that mean the same (so normalization is
// exercised for real: the desired resources come from schema.Load).
type specGen struct {
	Kind  schema.Kind
	Name  string
	Knobs [4]int
}

var genKinds = []schema.Kind{
	schema.KindTask, schema.KindService, schema.KindDevEnvironment,
	schema.KindFleet, schema.KindVolume, schema.KindGateway,
}

// yaml writes the spec; spelling 0 and 1 differ only in form (key order,
// shorthand vs object, map vs list, units, set order).
func (g specGen) yaml(spelling int) string {
	alt := spelling%2 == 1
	k := g.Knobs
	var lines []string
	add := func(format string, args ...any) { lines = append(lines, fmt.Sprintf(format, args...)) }
	switch g.Kind {
	case schema.KindTask:
		add("commands: [echo %d]", k[0])
		if k[1] > 0 {
			add("priority: %d", k[1]*5)
		}
		if alt {
			add("env:\n  - B=%d\n  - A=x", k[2])
			add("resources:\n  gpu: {name: [A100], count: %d}\n  memory: 8GB..", k[3]+1)
			add("stop_duration: 300")
		} else {
			add("env:\n  A: x\n  B: %d", k[2])
			add("resources:\n  gpu: A100:%d", k[3]+1)
			add("stop_duration: 5m")
		}
	case schema.KindService:
		add("commands: [busybox httpd -f -p %d]", 8000+k[0])
		add("port: %d", 8000+k[2])
		add("replicas: %d", k[1]+1)
		if k[3] > 0 {
			add("priority: %d", k[3]*5)
		}
		if alt {
			add("env:\n  - A=x")
		} else {
			add("env:\n  A: x")
		}
	case schema.KindDevEnvironment:
		add("ide: vscode")
		if alt {
			add("inactivity_duration: %d", (k[0]+1)*3600)
		} else {
			add("inactivity_duration: %dh", k[0]+1)
		}
		if k[1] > 0 {
			add("priority: %d", k[1]*5)
		}
		add("init: [echo %d]", k[2])
		if alt {
			add("resources:\n  cpu: {count: %d..%d}", k[3]+2, k[3]+2)
		} else {
			add("resources:\n  cpu: %d", k[3]+2)
		}
	case schema.KindFleet:
		add("nodes: %s", []string{"1", "1..2", "2"}[k[0]])
		bs := [][]string{{"aws"}, {"aws", "gcp"}, {"aws", "gcp", "azure"}}[k[1]]
		if alt {
			rev := make([]string, len(bs))
			for i, b := range bs {
				rev[len(bs)-1-i] = b
			}
			bs = rev
		}
		add("backends: [%s]", strings.Join(bs, ", "))
		if alt {
			add("idle_duration: %d", (k[2]+1)*3600)
		} else {
			add("idle_duration: %dh", k[2]+1)
		}
		if k[3] > 0 {
			add("max_price: %d", k[3])
		}
	case schema.KindVolume:
		add("backend: aws")
		add("region: %s", []string{"us-east-1", "us-west-2", "eu-west-1"}[k[1]])
		if alt {
			add("size: %dGB", (k[0]+1)*100)
		} else {
			add("size: %d", (k[0]+1)*100)
		}
	case schema.KindGateway:
		add("backend: aws")
		add("region: %s", []string{"us-east-1", "us-west-2", "eu-west-1"}[k[2]])
		add("domain: d%d.example.com", k[0])
		if k[1] > 0 || alt {
			add("default: %v", k[1] > 0)
		}
	}
	head := []string{"type: " + string(g.Kind), "name: " + g.Name}
	if alt {
		// Key order does not matter: name and type last.
		return strings.Join(append(lines, head[1], head[0]), "\n") + "\n"
	}
	return strings.Join(append(head, lines...), "\n") + "\n"
}

func (g specGen) file() string { return g.Name + "-" + string(g.Kind) + ".dstack.yml" }

// load validates and normalizes specs through schema.Load, as the revision
// pipeline does.
func load(t interface {
	Helper()
	Fatalf(format string, args ...any)
}, specs []specGen, spelling int) []schema.Resource {
	t.Helper()
	fsys := fstest.MapFS{}
	for _, g := range specs {
		fsys[g.file()] = &fstest.MapFile{Data: []byte(g.yaml(spelling))}
	}
	d, err := schema.Load(fsys)
	if err != nil {
		t.Fatalf("load generated specs: %v", err)
	}
	return d.Resources
}

// genSpecs draws a set of specs with identities unique per name space (runs
// share one; fleets, volumes and gateways each have their own).
func genSpecs(t *rapid.T, label string, names []string) []specGen {
	n := rapid.IntRange(0, 8).Draw(t, label+"_n")
	var out []specGen
	seen := map[string]bool{}
	for i := 0; i < n; i++ {
		g := specGen{
			Kind: rapid.SampledFrom(genKinds).Draw(t, label+"_kind"),
			Name: rapid.SampledFrom(names).Draw(t, label+"_name"),
		}
		for j := range g.Knobs {
			g.Knobs[j] = rapid.IntRange(0, 2).Draw(t, label+"_knob")
		}
		if k := plan.Key(g.Kind, g.Name); !seen[k] {
			seen[k] = true
			out = append(out, g)
		}
	}
	return out
}

// model is what the store keeps of managed resources, keyed as the store
// keys them (kind and name), with the status a plan's effects leave.
type model map[string]plan.Current

func storeKey(kind schema.Kind, name string) string { return string(kind) + "/" + name }

func (m model) observed() plan.Observed {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	// The store lists resources ordered by kind and name.
	slices.Sort(keys)
	var o plan.Observed
	for _, k := range keys {
		o.Resources = append(o.Resources, m[k])
	}
	return o
}

// apply carries out p's effects on the model as the reconciler does: held
// steps (and a held plan) change nothing; creates and replaces start a new
// run (not finished); a type change retires the old kind's row; deletes
// remove the row.
func (m model) apply(p plan.Plan) {
	if p.Held {
		return
	}
	for _, s := range p.Steps {
		if s.Held {
			continue
		}
		switch s.Action {
		case plan.Create, plan.Replace:
			if s.Current != nil && s.Current.Kind != s.Desired.Kind {
				delete(m, storeKey(s.Current.Kind, s.Current.Name))
			}
			m[storeKey(s.Kind, s.Name)] = plan.Current{
				Kind: s.Desired.Kind, Name: s.Name, File: s.Desired.File, Spec: s.Desired.JSON, Status: "submitted",
			}
		case plan.Update:
			c := m[storeKey(s.Kind, s.Name)]
			c.Spec, c.File = s.Desired.JSON, s.Desired.File
			m[storeKey(s.Kind, s.Name)] = c
		case plan.Delete:
			delete(m, storeKey(s.Current.Kind, s.Current.Name))
		}
	}
}
