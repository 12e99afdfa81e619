package plan_test

import (
	"slices"
	"strings"
	"testing"
	"testing/fstest"

	"hoist/reconciler/plan"
	"hoist/schema"
)

func loadYAML(t *testing.T, src string) schema.Resource {
	t.Helper()
	d, err := schema.Load(fstest.MapFS{"x.dstack.yml": &fstest.MapFile{Data: []byte(src)}})
	if err != nil {
		t.Fatalf("load:\n%s\n%v", src, err)
	}
	return d.Resources[0]
}

func current(r schema.Resource) plan.Current {
	return plan.Current{Kind: r.Kind, Name: r.Name, File: r.File, Spec: r.JSON, Status: "running"}
}

// TestCompute_decisionPerKind checks the action Compute picks for a change
// of each kind, following dstack's in-place rules (src/dstack/_internal/server/services/runs/spec.py and services/fleets.py).
func TestCompute_decisionPerKind(t *testing.T) {
	const (
		task    = "type: task\nname: tt\ncommands: [echo a]\n"
		service = "type: service\nname: ss\nport: 8000\ncommands: [busybox httpd -f -p 8000]\n"
		devenv  = "type: dev-environment\nname: dd\nide: vscode\n"
		fleet   = "type: fleet\nname: ff\nnodes: 1\nbackends: [aws]\n"
		sshf    = "type: fleet\nname: ff\nssh_config:\n  user: u\n  identity_file: ~/.ssh/id\n  hosts:\n"
		volume  = "type: volume\nname: vv\nbackend: aws\nregion: us-east-1\n"
		gateway = "type: gateway\nname: gg\nbackend: aws\nregion: us-east-1\n"
	)
	for _, tc := range []struct {
		name          string
		before, after string
		finished      bool
		suspended     bool
		confirmed     bool
		want          plan.Action
		rolling, held bool
		changed       []string
	}{
		{name: "task unchanged is a no-op", before: task, after: task, want: plan.Noop},
		{name: "task respelled is a no-op", before: task + "env: {A: x}\n", after: "commands: [echo a]\nenv: [A=x]\nname: tt\ntype: task\n", want: plan.Noop},
		{name: "task priority in place", before: task, after: task + "priority: 10\n", want: plan.Update, changed: []string{"priority"}},
		{name: "task commands replace", before: task, after: "type: task\nname: tt\ncommands: [echo b]\n", want: plan.Replace, changed: []string{"commands"}},
		{name: "task env replace", before: task, after: task + "env: [A=1]\n", want: plan.Replace, changed: []string{"env"}},
		{name: "task resources replace", before: task, after: task + "resources: {gpu: 1}\n", want: plan.Replace, changed: []string{"resources.gpu"}},
		{name: "finished task unchanged stays done", before: task, after: task, finished: true, want: plan.Noop},
		{name: "finished task with any change runs again", before: task, after: task + "priority: 10\n", finished: true, want: plan.Replace, changed: []string{"priority"}},
		{name: "suspended task changes wait", before: task, after: task + "env: [A=1]\n", suspended: true, want: plan.Noop, changed: []string{"env"}},
		{name: "task to service is a type change", before: task, after: "type: service\nname: tt\nport: 80\ncommands: [x]\n", want: plan.Replace, changed: []string{"type"}},
		{name: "service replicas in place", before: service, after: service + "replicas: 3\n", want: plan.Update, changed: []string{"replicas.max", "replicas.min"}},
		{name: "service scaling in place", before: service + "replicas: 1..3\nscaling: {metric: rps, target: 10}\n", after: service + "replicas: 0..3\nscaling: {metric: rps, target: 20}\n", want: plan.Update, changed: []string{"replicas.min", "scaling.target"}},
		{name: "service priority in place", before: service, after: service + "priority: 3\n", want: plan.Update, changed: []string{"priority"}},
		{name: "service commands rolling", before: service, after: "type: service\nname: ss\nport: 8000\ncommands: [busybox httpd -f -p 8000 -v]\n", want: plan.Replace, rolling: true, changed: []string{"commands"}},
		{name: "service user rolling", before: service, after: service + "user: root\n", want: plan.Replace, rolling: true, changed: []string{"user"}},
		{name: "service port and replicas rolling", before: service, after: "type: service\nname: ss\nport: 8001\nreplicas: 2\ncommands: [busybox httpd -f -p 8000]\n", want: plan.Replace, rolling: true, changed: []string{"port.container_port", "replicas.max", "replicas.min"}},
		{name: "service max_duration replace", before: service, after: service + "max_duration: 1h\n", want: plan.Replace, changed: []string{"max_duration"}},
		{name: "dev environment inactivity in place", before: devenv, after: devenv + "inactivity_duration: 2h\n", want: plan.Update, changed: []string{"inactivity_duration"}},
		{name: "dev environment ide replace", before: devenv, after: "type: dev-environment\nname: dd\nide: cursor\n", want: plan.Replace, changed: []string{"ide"}},
		{name: "fleet nodes in place", before: fleet, after: "type: fleet\nname: ff\nnodes: 2\nbackends: [aws]\n", want: plan.Update, changed: []string{"nodes.max", "nodes.min", "nodes.target"}},
		{name: "fleet backends in place", before: fleet, after: "type: fleet\nname: ff\nnodes: 1\nbackends: [aws, gcp]\n", want: plan.Update, changed: []string{"backends"}},
		{name: "fleet resources in place", before: fleet, after: fleet + "resources: {gpu: 1}\n", want: plan.Update, changed: []string{"resources.gpu"}},
		{name: "fleet placement replace", before: fleet, after: fleet + "placement: cluster\n", want: plan.Replace, changed: []string{"placement"}},
		{name: "fleet cloud to ssh replace", before: fleet, after: sshf + "    - 10.0.0.1\n", want: plan.Replace},
		{name: "ssh fleet host added in place", before: sshf + "    - 10.0.0.1\n", after: sshf + "    - 10.0.0.1\n    - 10.0.0.2\n", want: plan.Update, changed: []string{"ssh_config.hosts"}},
		{name: "ssh fleet host removed in place", before: sshf + "    - 10.0.0.1\n    - 10.0.0.2\n", after: sshf + "    - 10.0.0.2\n", want: plan.Update, changed: []string{"ssh_config.hosts"}},
		{name: "ssh fleet host changed replace", before: sshf + "    - 10.0.0.1\n", after: sshf + "    - {hostname: 10.0.0.1, port: 2222}\n", want: plan.Replace, changed: []string{"ssh_config.hosts"}},
		{name: "ssh fleet user changed replace", before: sshf + "    - 10.0.0.1\n", after: strings.Replace(sshf, "user: u", "user: w", 1) + "    - 10.0.0.1\n", want: plan.Replace},
		{name: "volume size replace held", before: volume + "size: 100GB\n", after: volume + "size: 200GB\n", want: plan.Replace, held: true, changed: []string{"size"}},
		{name: "volume replace confirmed", before: volume + "size: 100GB\n", after: volume + "size: 200GB\n", confirmed: true, want: plan.Replace, changed: []string{"size"}},
		{name: "gateway domain in place", before: gateway, after: gateway + "domain: example.com\n", want: plan.Update, changed: []string{"domain"}},
		{name: "gateway default in place", before: gateway, after: gateway + "default: true\n", want: plan.Update, changed: []string{"default"}},
		{name: "gateway region replace", before: gateway, after: strings.Replace(gateway, "us-east-1", "eu-west-1", 1), want: plan.Replace, changed: []string{"region"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, a := loadYAML(t, tc.before), loadYAML(t, tc.after)
			c := current(b)
			c.Finished, c.Suspended = tc.finished, tc.suspended
			p := plan.Compute([]schema.Resource{a}, plan.Observed{Resources: []plan.Current{c}}, genNow, plan.Options{Confirmed: tc.confirmed})
			if len(p.Steps) != 1 {
				t.Fatalf("steps = %+v, want one", p.Steps)
			}
			s := p.Steps[0]
			if s.Action != tc.want || s.Rolling != tc.rolling || s.Held != tc.held {
				t.Errorf("step = %s (rolling %v, held %v: %s), want %s (rolling %v, held %v)", s.Action, s.Rolling, s.Held, s.Reason, tc.want, tc.rolling, tc.held)
			}
			if tc.changed != nil && !slices.Equal(s.Changed, tc.changed) {
				t.Errorf("changed = %v, want %v", s.Changed, tc.changed)
			}
			if s.Reason == "" {
				t.Errorf("step has no reason")
			}
			if tc.suspended && !strings.Contains(s.Reason, "suspended") {
				t.Errorf("reason = %q, want it to say suspended", s.Reason)
			}
		})
	}
}

// TestCompute_deletes checks what removing a spec from Git does per kind.
func TestCompute_deletes(t *testing.T) {
	cur := func(kind schema.Kind, name string) plan.Current {
		return plan.Current{Kind: kind, Name: name, Spec: []byte(`{"type":"` + string(kind) + `"}`), Status: "running"}
	}
	keep := []plan.Current{cur(schema.KindTask, "k1"), cur(schema.KindTask, "k2"), cur(schema.KindTask, "k3")}
	keepDesired := []schema.Resource{
		{Kind: schema.KindTask, Name: "k1", JSON: keep[0].Spec},
		{Kind: schema.KindTask, Name: "k2", JSON: keep[1].Spec},
		{Kind: schema.KindTask, Name: "k3", JSON: keep[2].Spec},
	}
	finished := cur(schema.KindTask, "old")
	finished.Finished, finished.Status = true, "done"
	pruned := cur(schema.KindVolume, "v")
	pruned.Prune = true
	suspended := cur(schema.KindService, "paused")
	suspended.Suspended = true
	for _, tc := range []struct {
		name      string
		gone      plan.Current
		confirmed bool
		held      bool
		keep      bool
		reason    string
	}{
		{name: "active run is stopped", gone: cur(schema.KindService, "svc"), reason: "stopped"},
		{name: "finished run loses nothing", gone: finished, reason: "already finished"},
		{name: "fleet waits for its runs", gone: cur(schema.KindFleet, "f"), reason: "no active run"},
		{name: "volume needs confirmation", gone: cur(schema.KindVolume, "v"), held: true, reason: "confirmation"},
		{name: "gateway needs confirmation", gone: cur(schema.KindGateway, "g"), held: true, reason: "confirmation"},
		{name: "confirmed volume delete", gone: cur(schema.KindVolume, "v"), confirmed: true},
		{name: "volume that opted in to pruning", gone: pruned, reason: "pruning"},
		{name: "suspended run waits", gone: suspended, keep: true, reason: "suspended"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			obs := plan.Observed{Resources: append(slices.Clone(keep), tc.gone)}
			p := plan.Compute(keepDesired, obs, genNow, plan.Options{Confirmed: tc.confirmed})
			if p.Held {
				t.Fatalf("one delete among four held the plan: %s", p.HoldReason)
			}
			i := slices.IndexFunc(p.Steps, func(s plan.Step) bool { return s.Name == tc.gone.Name })
			want := plan.Delete
			if tc.keep {
				want = plan.Noop
			}
			if i < 0 || p.Steps[i].Action != want {
				t.Fatalf("steps = %+v, want a %s of %s", p.Steps, want, tc.gone.Name)
			}
			s := p.Steps[i]
			if s.Held != tc.held || !strings.Contains(s.Reason, tc.reason) {
				t.Errorf("delete held %v reason %q, want held %v and a reason with %q", s.Held, s.Reason, tc.held, tc.reason)
			}
			wantNoops := 3 // the kept runs
			if tc.keep {
				wantNoops++
			}
			if n := p.Count(plan.Noop); n != wantNoops {
				t.Errorf("no-ops = %d, want %d", n, wantNoops)
			}
		})
	}
}

// TestCompute_massDeletion checks the hold thresholds: at least
// MassDeleteMin live resources, and more than half of them or all.
func TestCompute_massDeletion(t *testing.T) {
	live := func(n int, prefix string) ([]plan.Current, []schema.Resource) {
		var cs []plan.Current
		var ds []schema.Resource
		for i := 0; i < n; i++ {
			name := prefix + string(rune('a'+i))
			spec := []byte(`{"type":"task","name":"` + name + `"}`)
			cs = append(cs, plan.Current{Kind: schema.KindTask, Name: name, Spec: spec, Status: "running"})
			ds = append(ds, schema.Resource{Kind: schema.KindTask, Name: name, JSON: spec})
		}
		return cs, ds
	}
	for _, tc := range []struct {
		name                 string
		total, remove, doneN int
		held                 bool
	}{
		{name: "one of one is not a mass", total: 1, remove: 1},
		{name: "two of two is held", total: 2, remove: 2, held: true},
		{name: "two of four is half, not more", total: 4, remove: 2},
		{name: "three of four is held", total: 4, remove: 3, held: true},
		{name: "three of seven passes", total: 7, remove: 3},
		{name: "finished runs do not count", total: 1, remove: 1, doneN: 5},
		{name: "all of ten is held", total: 10, remove: 10, held: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cs, ds := live(tc.total, "l")
			for i := 0; i < tc.doneN; i++ {
				cs = append(cs, plan.Current{Kind: schema.KindTask, Name: "done" + string(rune('a'+i)), Spec: []byte(`{}`), Status: "done", Finished: true})
			}
			p := plan.Compute(ds[tc.remove:], plan.Observed{Resources: cs}, genNow, plan.Options{})
			if p.Held != tc.held {
				t.Fatalf("held = %v (%s), want %v", p.Held, p.HoldReason, tc.held)
			}
			if tc.held && !strings.Contains(p.HoldReason, "confirm") {
				t.Errorf("hold reason = %q, want it to ask for confirmation", p.HoldReason)
			}
			if p.Count(plan.Delete) != tc.remove+tc.doneN {
				t.Errorf("deletes = %d, want %d", p.Count(plan.Delete), tc.remove+tc.doneN)
			}
		})
	}
}

// TestCompute_orderAndCost checks the step order (volumes, gateways,
// fleets, runs; then by name) and the cost estimates.
func TestCompute_orderAndCost(t *testing.T) {
	d, err := schema.Load(fstest.MapFS{
		"a.dstack.yml": {Data: []byte("type: task\nname: aa\ncommands: [x]\n")},
		"b.dstack.yml": {Data: []byte("type: fleet\nname: bb\nnodes: 1\n")},
		"c.dstack.yml": {Data: []byte("type: volume\nname: cc\nbackend: aws\nregion: r\nsize: 10\n")},
		"d.dstack.yml": {Data: []byte("type: gateway\nname: dd\nbackend: aws\nregion: r\n")},
		"e.dstack.yml": {Data: []byte("type: service\nname: ee\nport: 80\ncommands: [x]\n")},
	})
	if err != nil {
		t.Fatal(err)
	}
	svc, _ := d.Lookup(schema.KindService, "ee")
	obs := plan.Observed{Resources: []plan.Current{
		{Kind: schema.KindTask, Name: "gone", Spec: []byte(`{}`), PricePerHour: 2, Status: "running"},
		{Kind: schema.KindService, Name: "ee", Spec: svc.JSON, PricePerHour: 1.5, Status: "running"},
	}}
	est := func(schema.Resources, schema.Profile) (float64, bool) { return 1, true }
	p := plan.Compute(d.Resources, obs, genNow, plan.Options{Estimate: est})
	var got []string
	for _, s := range p.Steps {
		got = append(got, string(s.Action)+" "+string(s.Kind)+"/"+s.Name)
	}
	want := []string{"create volume/cc", "create gateway/dd", "create fleet/bb", "create task/aa", "no-op service/ee", "delete task/gone"}
	if !slices.Equal(got, want) {
		t.Errorf("steps = %q, want %q", got, want)
	}
	// After: fleet bb's one node at $1, task aa on it ($0), service ee as
	// it is ($1.5), task gone deleted.
	if p.CostBefore != 3.5 || p.CostAfter != 2.5 {
		t.Errorf("cost before %v after %v, want 3.5 and 2.5", p.CostBefore, p.CostAfter)
	}
	if !p.Now.Equal(genNow) {
		t.Errorf("now = %v", p.Now)
	}
	// Without estimates, what stays keeps its current cost.
	p = plan.Compute(d.Resources, obs, genNow, plan.Options{})
	if p.CostAfter != 1.5 {
		t.Errorf("cost after without estimates = %v, want 1.5", p.CostAfter)
	}
}

// TestChangedFields checks field paths one level deep and that null and
// missing are alike.
func TestChangedFields(t *testing.T) {
	for _, tc := range []struct {
		name, a, b string
		want       []string
	}{
		{"same", `{"a":1,"b":{"c":2}}`, `{"b":{"c":2},"a":1}`, nil},
		{"null is missing", `{"a":1,"b":null}`, `{"a":1}`, nil},
		{"nested", `{"r":{"gpu":1,"cpu":2}}`, `{"r":{"gpu":2,"cpu":2}}`, []string{"r.gpu"}},
		{"added and removed", `{"a":1}`, `{"b":1}`, []string{"a", "b"}},
		{"list", `{"l":[1,2]}`, `{"l":[2,1]}`, []string{"l"}},
		{"not json", `x`, `y`, []string{"spec"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := plan.ChangedFields([]byte(tc.a), []byte(tc.b)); !slices.Equal(got, tc.want) {
				t.Errorf("ChangedFields = %v, want %v", got, tc.want)
			}
		})
	}
}
