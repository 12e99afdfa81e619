package reconciler

import (
	"slices"
	"testing"
	"time"

	"hoist/backends"
	"hoist/backends/fake"
	"hoist/store"
)

// TestAuditLeaks_deletesVolumesAndPlacementGroupsTheStoreDoesNotKnow leaves
// volumes and placement groups on the fake provider behind the store's back
// and checks that the audit deletes the unknown ones (and a volume the
// store knows as deleted) once they are older than the grace, and leaves
// known, registered and young ones alone.
func TestAuditLeaks_deletesVolumesAndPlacementGroupsTheStoreDoesNotKnow(t *testing.T) {
	f := newFixture(t, nil)
	be := f.withFakeBackend(fake.Config{}, func(c *Config) { c.LeakGrace = 10 * time.Minute })
	own := map[string]string{backends.TagInstallation: f.c.cfg.Installation, backends.TagProject: f.c.cfg.Project}

	known := &store.Volume{Name: "data", Backend: fake.DefaultName, Region: "loop", Status: store.VolumeActive}
	gone := &store.Volume{Name: "old", Backend: fake.DefaultName, Region: "loop", Status: store.VolumeActive, Deleted: true}
	for _, v := range []*store.Volume{known, gone} {
		if err := f.st.CreateVolume(f.ctx, v); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := be.CreateVolume(f.ctx, backends.VolumeSpec{ID: known.ID, Name: "data", Region: "loop", SizeGB: 10, Tags: own}); err != nil {
		t.Fatal(err)
	}
	be.LeakVolume(gone.ID, "loop", 10, own)
	be.LeakVolume("vol-leaked", "loop", 10, own)
	be.LeakVolume("vol-other", "loop", 10, map[string]string{backends.TagInstallation: "another-server"})
	// Another project's controller of this server audits its own.
	be.LeakVolume("vol-project-b", "loop", 10, map[string]string{backends.TagInstallation: f.c.cfg.Installation, backends.TagProject: "b"})
	be.AddExternalVolume("vol-external", "loop", 10)
	if _, err := be.RegisterVolume(f.ctx, backends.VolumeSpec{ID: "registered", Region: "loop", ExternalID: "vol-external", Tags: own}); err != nil {
		t.Fatal(err)
	}

	fl := &store.Fleet{Name: "pool", Status: store.FleetActive, PlacementGroups: []store.FleetPlacementGroup{{ID: "pg-known", Backend: fake.DefaultName, Region: "loop"}}}
	if err := f.st.CreateFleet(f.ctx, fl); err != nil {
		t.Fatal(err)
	}
	if _, err := be.CreatePlacementGroup(f.ctx, backends.PlacementGroupSpec{ID: "pg-known", Name: "pool", Region: "loop", Tags: own}); err != nil {
		t.Fatal(err)
	}
	be.LeakPlacementGroup("pg-leaked", "loop", own)

	if n := f.c.auditLeaks(f.ctx); n != 0 {
		t.Fatalf("audit deleted %d resources younger than the grace", n)
	}
	f.clock.Advance(11 * time.Minute)
	be.LeakVolume("vol-young", "loop", 10, own)
	be.LeakPlacementGroup("pg-young", "loop", own)
	if n := f.c.auditLeaks(f.ctx); n != 3 {
		t.Fatalf("audit deleted %d resources, want 3 (two volumes, one placement group)", n)
	}

	var vols []string
	for _, v := range be.Volumes() {
		vols = append(vols, v.ID)
	}
	slices.Sort(vols)
	// Leaks have no hoist id in the fake's records: vol-other,
	// vol-project-b and vol-young show as "".
	if want := []string{"", "", "", known.ID, "registered"}; !slices.Equal(vols, want) {
		t.Errorf("volumes left: %q, want %q", vols, want)
	}
	listed, err := be.ListVolumes(f.ctx, own)
	if err != nil {
		t.Fatal(err)
	}
	var tagged []string
	for _, v := range listed {
		tagged = append(tagged, v.ID)
	}
	slices.Sort(tagged)
	if want := []string{known.ID, "vol-young"}; !slices.Equal(tagged, want) {
		t.Errorf("volumes with our tags left: %q, want %q", tagged, want)
	}
	var groups []string
	for _, g := range be.PlacementGroups() {
		groups = append(groups, g.ID)
	}
	if want := []string{"pg-known", "pg-young"}; !slices.Equal(groups, want) {
		t.Errorf("placement groups left: %q, want %q", groups, want)
	}
	for kind, id := range map[string]string{"volume": "vol-leaked", "placement_group": "pg-leaked"} {
		es, _ := f.st.ListEvents(f.ctx, store.EventFilter{ObjectKind: kind, ObjectName: id})
		if len(es) != 1 || es[0].Type != "leaked" {
			t.Errorf("events of the leaked %s = %+v", kind, es)
		}
	}
}
