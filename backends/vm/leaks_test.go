package vm_test

import (
	"testing"

	"hoist/backends"
	"hoist/e2e/cloudsim/sim"
)

// TestLostVolumeAndGroupRecords creates a volume and a placement group,
// then loses the engine's records of them (as a store restored from a
// backup would): ListVolumes and ListPlacementGroups still show them by
// their tags, with hoist's ids, and DeleteVolume / DeletePlacementGroup
// find them by those tags and delete them at the provider.
func TestLostVolumeAndGroupRecords(t *testing.T) {
	e := newEnv(t)
	ctx := t.Context()
	own := map[string]string{backends.TagInstallation: "engine-leaks"}
	vb := e.b.(backends.VolumeBackend)
	pb := e.b.(backends.PlacementBackend)
	v, err := vb.CreateVolume(ctx, backends.VolumeSpec{ID: "vol-lost", Name: "data", Region: "us-east-1", SizeGB: 1, Tags: own})
	if err != nil {
		t.Fatalf("CreateVolume: %v", err)
	}
	g, err := pb.CreatePlacementGroup(ctx, backends.PlacementGroupSpec{ID: "pg-lost", Name: "pool", Region: "us-east-1", Tags: own})
	if err != nil {
		t.Fatalf("CreatePlacementGroup: %v", err)
	}
	for backend, id := range map[string]string{"aws.volumes": "vol-lost", "aws.placement": "pg-lost"} {
		if err := e.recs.DeleteBackendRecord(ctx, backend, id); err != nil {
			t.Fatal(err)
		}
	}

	vols, err := vb.ListVolumes(ctx, own)
	if err != nil || len(vols) != 1 || vols[0].ID != "vol-lost" || vols[0].ProviderID != v.ProviderID || !vols[0].Owned || vols[0].CreatedAt.IsZero() {
		t.Fatalf("ListVolumes without a record = %+v, %v; want vol-lost (%s), owned, with its creation time", vols, err, v.ProviderID)
	}
	groups, err := pb.ListPlacementGroups(ctx, own)
	if err != nil || len(groups) != 1 || groups[0].ID != "pg-lost" || groups[0].ProviderID != g.ProviderID {
		t.Fatalf("ListPlacementGroups without a record = %+v, %v; want pg-lost (%s)", groups, err, g.ProviderID)
	}

	if err := vb.DeleteVolume(ctx, "vol-lost"); err != nil {
		t.Fatalf("DeleteVolume without a record: %v", err)
	}
	if err := pb.DeletePlacementGroup(ctx, "pg-lost"); err != nil {
		t.Fatalf("DeletePlacementGroup without a record: %v", err)
	}
	n := 0
	for _, r := range e.cs.Sim().List("aws", "") {
		if r.Tags[backends.TagInstallation] != "engine-leaks" {
			continue
		}
		n++
		if r.State != sim.StateDeleted {
			t.Errorf("simulator %s %s (%s) is %s, want deleted", r.Kind, r.ID, r.Name, r.State)
		}
	}
	if n != 2 {
		t.Errorf("simulator has %d resources with the test's tags, want 2 (a volume, a placement group)", n)
	}
	if vols, err := vb.ListVolumes(ctx, own); err != nil || len(vols) != 0 {
		t.Errorf("ListVolumes after the delete = %+v, %v; want none", vols, err)
	}
	if groups, err := pb.ListPlacementGroups(ctx, own); err != nil || len(groups) != 0 {
		t.Errorf("ListPlacementGroups after the delete = %+v, %v; want none", groups, err)
	}
}
