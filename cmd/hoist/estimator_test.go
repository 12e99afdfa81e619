package main

import (
	"testing"
	"testing/fstest"
	"time"

	"hoist/backends/offers"
	"hoist/backends/offers/query"
	"hoist/reconciler/plan"
	"hoist/schema"
)

// TestEstimator_pricesPlansFromTheCatalog: with the embedded catalog a
// backend fleet costs nodes × its cheapest fitting offer, a task on it adds
// nothing, and fleets of this host or of SSH hosts cost nothing.
func TestEstimator_pricesPlansFromTheCatalog(t *testing.T) {
	cat, err := offers.Embedded()
	if err != nil {
		t.Fatal(err)
	}
	est := estimator(offers.NewMarket(offers.MarketConfig{Catalog: cat}), nil)
	d, err := schema.Load(fstest.MapFS{
		"gpu.dstack.yml":   {Data: []byte("type: fleet\nname: gpu\nnodes: 2\nbackends: [aws]\nresources:\n  gpu: 1\n")},
		"here.dstack.yml":  {Data: []byte("type: fleet\nname: here\nnodes: 1\nbackends: [local]\n")},
		"byoh.dstack.yml":  {Data: []byte("type: fleet\nname: byoh\nssh_config:\n  user: u\n  identity_file: ~/.ssh/id\n  hosts: [10.0.0.1]\n")},
		"train.dstack.yml": {Data: []byte("type: task\nname: train\ncommands: [x]\nfleets: [gpu]\nresources:\n  gpu: 1\n")},
	})
	if err != nil {
		t.Fatal(err)
	}
	gpu, _ := d.Lookup(schema.KindFleet, "gpu")
	spec := gpu.Spec.(*schema.Fleet)
	q := query.FromSpec(*spec.Resources, schema.Profile{Backends: spec.Backends})
	q.Disk, q.Limit = offers.Range{}, 1
	cheapest := cat.Query(q)
	if len(cheapest) == 0 || cheapest[0].Price <= 0 {
		t.Fatalf("the embedded catalog has no priced aws one-GPU offer: %+v", cheapest)
	}
	p := plan.Compute(d.Resources, plan.Observed{}, time.Now(), plan.Options{Estimate: est})
	if want := 2 * cheapest[0].Price; p.CostAfter != want || p.CostBefore != 0 {
		t.Fatalf("cost %v → %v, want 0 → %v (2 × $%v)", p.CostBefore, p.CostAfter, want, cheapest[0].Price)
	}
	if v, ok := est(schema.Resources{}, schema.Profile{Backends: []string{"local"}}); !ok || v != 0 {
		t.Fatalf("this host = %v, %v; want free", v, ok)
	}
}
