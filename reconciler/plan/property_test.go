package plan_test

import (
	"slices"
	"testing"
	"time"

	"pgregory.net/rapid"

	"hoist/reconciler/plan"
	"hoist/schema"
)

var (
	genNames = []string{"alpha", "bravo", "charlie", "delta"}
	genNow   = time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC)
)

// worldFrom builds the store model a first revision leaves: every spec
// created, then some runs finished and some resources suspended.
func worldFrom(t *rapid.T, before []schema.Resource) model {
	m := model{}
	m.apply(plan.Compute(before, plan.Observed{}, genNow, plan.Options{}))
	for _, k := range mapKeys(m) {
		c := m[k]
		if c.Kind.IsRun() && rapid.Bool().Draw(t, "finished") {
			c.Finished, c.Status = true, rapid.SampledFrom([]string{"done", "failed", "terminated"}).Draw(t, "final")
		}
		c.Suspended = rapid.IntRange(0, 5).Draw(t, "suspended") == 0
		c.Prune = (c.Kind == schema.KindVolume || c.Kind == schema.KindGateway) && rapid.Bool().Draw(t, "prune")
		m[k] = c
	}
	return m
}

func mapKeys(m model) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

// checkStepsCoverEverything checks that every desired resource has exactly
// one step, that nothing the revision declares is deleted, and that every
// observed resource the revision dropped gets a delete.
func checkStepsCoverEverything(t *rapid.T, desired []schema.Resource, obs plan.Observed, p plan.Plan) {
	declared := map[string]int{}
	for _, d := range desired {
		declared[plan.Key(d.Kind, d.Name)]++
	}
	steps := map[string]int{}
	for _, s := range p.Steps {
		k := plan.Key(s.Kind, s.Name)
		if s.Action == plan.Delete {
			if declared[k] > 0 {
				t.Fatalf("plan deletes %s %s, which the revision still declares", s.Kind, s.Name)
			}
			continue
		}
		if s.Desired == nil {
			if s.Action != plan.Noop || s.Current == nil || !s.Current.Suspended || declared[k] > 0 {
				t.Fatalf("step %s %s (%s) has no desired resource", s.Kind, s.Name, s.Action)
			}
			continue // a suspended resource whose spec left Git
		}
		steps[k]++
	}
	for k, n := range declared {
		if steps[k] != 1 || n != 1 {
			t.Fatalf("%s is declared %d times and has %d non-delete steps, want 1 and 1", k, n, steps[k])
		}
	}
	for _, c := range obs.Resources {
		k := plan.Key(c.Kind, c.Name)
		want := plan.Delete
		if c.Suspended {
			want = plan.Noop // no sync while suspended, removal included
		}
		if declared[k] == 0 && !slices.ContainsFunc(p.Steps, func(s plan.Step) bool {
			return s.Action == want && s.Current != nil && s.Current.Kind == c.Kind && s.Name == c.Name
		}) {
			t.Fatalf("%s %s left Git but the plan does not %s it", c.Kind, c.Name, want)
		}
	}
}

// TestCompute_applyThenReplanIsNoop: applying a (confirmed) plan and
// planning the same revision again yields only no-ops, and no plan ever
// deletes what its revision declares.
func TestCompute_applyThenReplanIsNoop(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		before := load(t, genSpecs(t, "before", genNames), rapid.IntRange(0, 1).Draw(t, "spelling_before"))
		after := load(t, genSpecs(t, "after", genNames), rapid.IntRange(0, 1).Draw(t, "spelling_after"))
		m := worldFrom(t, before)
		obs := m.observed()

		p := plan.Compute(after, obs, genNow, plan.Options{})
		checkStepsCoverEverything(t, after, obs, p)
		pc := plan.Compute(after, obs, genNow, plan.Options{Confirmed: true})
		checkStepsCoverEverything(t, after, obs, pc)
		if pc.Held {
			t.Fatalf("a confirmed plan is held: %s", pc.HoldReason)
		}
		for _, s := range pc.Steps {
			if s.Held {
				t.Fatalf("a confirmed plan holds step %s %s (%s: %s)", s.Kind, s.Name, s.Action, s.Reason)
			}
		}

		m.apply(pc)
		again := plan.Compute(after, m.observed(), genNow, plan.Options{})
		for _, s := range again.Steps {
			if s.Action != plan.Noop {
				t.Fatalf("re-plan after apply: %s %s is %s (%s; changed %v), want no-op", s.Kind, s.Name, s.Action, s.Reason, s.Changed)
			}
		}
		if again.Held || again.Changes() {
			t.Fatalf("re-plan after apply has changes (held %v)", again.Held)
		}
	})
}

// TestCompute_respelledRevisionIsNoop: a revision that writes the same
// specs in other words (key order, shorthand vs object, units, set order)
// normalizes to the same bytes and plans as no-ops.
func TestCompute_respelledRevisionIsNoop(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		specs := genSpecs(t, "specs", genNames)
		a, b := load(t, specs, 0), load(t, specs, 1)
		for i := range a {
			if string(a[i].JSON) != string(b[i].JSON) {
				t.Fatalf("%s %s normalizes differently:\n%s\n%s\nfrom\n%s\n%s", a[i].Kind, a[i].Name, a[i].JSON, b[i].JSON,
					specs[0].yaml(0), specs[0].yaml(1))
			}
		}
		m := model{}
		m.apply(plan.Compute(a, plan.Observed{}, genNow, plan.Options{}))
		p := plan.Compute(b, m.observed(), genNow, plan.Options{})
		if p.Changes() {
			for _, s := range p.Steps {
				t.Logf("%s %s: %s %v", s.Kind, s.Name, s.Action, s.Changed)
			}
			t.Fatalf("re-applying the same revision spelled differently changes something")
		}
	})
}

// TestCompute_massDeletionHold: a plan is held as a whole exactly when it
// deletes at least MassDeleteMin live resources and more than half of them
// (or all); finished runs are not live. Confirming lifts the hold.
func TestCompute_massDeletionHold(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		before := load(t, genSpecs(t, "before", genNames), 0)
		after := load(t, genSpecs(t, "after", genNames), 0)
		m := worldFrom(t, before)
		obs := m.observed()
		declared := map[string]bool{}
		for _, d := range after {
			declared[plan.Key(d.Kind, d.Name)] = true
		}
		live, deletes := 0, 0
		for _, c := range obs.Resources {
			if c.Kind.IsRun() && c.Finished {
				continue
			}
			live++
			if !declared[plan.Key(c.Kind, c.Name)] && !c.Suspended {
				deletes++
			}
		}
		want := deletes >= plan.MassDeleteMin && (deletes == live || 2*deletes > live)
		p := plan.Compute(after, obs, genNow, plan.Options{})
		if p.Held != want {
			t.Fatalf("held = %v, want %v (deletes %d of %d live): %s", p.Held, want, deletes, live, p.HoldReason)
		}
		if pc := plan.Compute(after, obs, genNow, plan.Options{Confirmed: true}); pc.Held {
			t.Fatalf("confirmed plan still held: %s", pc.HoldReason)
		}
	})
}

// TestCompute_infraDeletesNeedConfirmation: deleting a volume or gateway is
// held unless confirmed or the spec opted in to pruning; deleting runs and
// fleets is never held step by step.
func TestCompute_infraDeletesNeedConfirmation(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		before := load(t, genSpecs(t, "before", genNames), 0)
		after := load(t, genSpecs(t, "after", genNames), 0)
		m := worldFrom(t, before)
		confirmed := rapid.Bool().Draw(t, "confirmed")
		p := plan.Compute(after, m.observed(), genNow, plan.Options{Confirmed: confirmed})
		for _, s := range p.Steps {
			if s.Action != plan.Delete {
				continue
			}
			infra := s.Kind == schema.KindVolume || s.Kind == schema.KindGateway
			want := infra && !confirmed && !s.Current.Prune
			if s.Held != want {
				t.Fatalf("delete %s %s: held = %v, want %v (confirmed %v, prune %v)", s.Kind, s.Name, s.Held, want, confirmed, s.Current.Prune)
			}
		}
	})
}

// TestCompute_deterministic: the same inputs in any order give the same
// plan.
func TestCompute_deterministic(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		before := load(t, genSpecs(t, "before", genNames), 0)
		after := load(t, genSpecs(t, "after", genNames), 0)
		obs := worldFrom(t, before).observed()
		p1 := plan.Compute(after, obs, genNow, plan.Options{})

		perm := rapid.Permutation(obs.Resources).Draw(t, "observed_order")
		dperm := rapid.Permutation(after).Draw(t, "desired_order")
		p2 := plan.Compute(dperm, plan.Observed{Resources: perm}, genNow, plan.Options{})
		if len(p1.Steps) != len(p2.Steps) {
			t.Fatalf("%d steps vs %d", len(p1.Steps), len(p2.Steps))
		}
		for i := range p1.Steps {
			a, b := p1.Steps[i], p2.Steps[i]
			if a.Kind != b.Kind || a.Name != b.Name || a.Action != b.Action || a.Reason != b.Reason ||
				a.Held != b.Held || !slices.Equal(a.Changed, b.Changed) {
				t.Fatalf("step %d differs: %+v vs %+v", i, a, b)
			}
		}
		if p1.Held != p2.Held || p1.HoldReason != p2.HoldReason {
			t.Fatalf("hold differs")
		}
	})
}
