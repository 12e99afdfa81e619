package gce_test

import (
	"context"
	"errors"
	"testing"

	compute "cloud.google.com/go/compute/apiv1"
	"cloud.google.com/go/compute/apiv1/computepb"
	"google.golang.org/api/iterator"
	"google.golang.org/protobuf/proto"

	"hoist/e2e/cloudsim/gce"
)

// TestResourcePolicies_aggregatedList lists resource policies of every
// region with the official client, keyed regions/<region>, with their
// description and creation time; a deleted one is left out.
func TestResourcePolicies_aggregatedList(t *testing.T) {
	e := start(t)
	ctx := context.Background()
	pols, err := compute.NewResourcePoliciesRESTClient(ctx, e.opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer pols.Close()
	for _, p := range []struct{ region, name string }{{"us-central1", "pg-a"}, {"europe-west4", "pg-b"}} {
		op, err := pols.Insert(ctx, &computepb.InsertResourcePolicyRequest{Project: gce.Project, Region: p.region,
			ResourcePolicyResource: &computepb.ResourcePolicy{Name: proto.String(p.name), Description: proto.String(`{"hoist":{"k":"v"}}`),
				GroupPlacementPolicy: &computepb.ResourcePolicyGroupPlacementPolicy{Collocation: proto.String("COLLOCATED")}}})
		if err != nil {
			t.Fatal(err)
		}
		if err := op.Wait(ctx); err != nil {
			t.Fatal(err)
		}
	}
	op, err := pols.Delete(ctx, &computepb.DeleteResourcePolicyRequest{Project: gce.Project, Region: "europe-west4", ResourcePolicy: "pg-b"})
	if err != nil {
		t.Fatal(err)
	}
	if err := op.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	got := map[string]*computepb.ResourcePolicy{}
	it := pols.AggregatedList(ctx, &computepb.AggregatedListResourcePoliciesRequest{Project: gce.Project})
	for {
		pair, err := it.Next()
		if errors.Is(err, iterator.Done) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range pair.Value.GetResourcePolicies() {
			got[pair.Key+"/"+p.GetName()] = p
		}
	}
	p, ok := got["regions/us-central1/pg-a"]
	if len(got) != 1 || !ok || p.GetDescription() != `{"hoist":{"k":"v"}}` || p.GetCreationTimestamp() == "" {
		t.Errorf("aggregatedList = %v, want only regions/us-central1/pg-a with its description and creation time", got)
	}
}
