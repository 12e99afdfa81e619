package store

import (
	"errors"
	"testing"
)

// TestGetFleetByPlacementGroup finds the fleet, deleted or not, that
// records a placement group id, and nothing for an id no fleet records or
// one that only matches as a LIKE pattern would.
func TestGetFleetByPlacementGroup(t *testing.T) {
	forEachDB(t, func(t *testing.T, s *Store, _ *fakeClock) {
		ctx := t.Context()
		live := &Fleet{Name: "pool", Status: FleetActive, PlacementGroups: []FleetPlacementGroup{
			{ID: "pg-a", Backend: "aws", Region: "us-east-1"}, {ID: "pg_b", Backend: "aws", Region: "us-west-2", ProviderID: "x"},
		}}
		gone := &Fleet{Name: "old", Status: FleetTerminated, Deleted: true, PlacementGroups: []FleetPlacementGroup{{ID: "pg-c", Backend: "gcp"}}}
		for _, f := range []*Fleet{live, gone} {
			if err := s.CreateFleet(ctx, f); err != nil {
				t.Fatal(err)
			}
		}
		for id, want := range map[string]string{"pg-a": live.ID, "pg_b": live.ID, "pg-c": gone.ID} {
			if f, err := s.GetFleetByPlacementGroup(ctx, id); err != nil || f.ID != want {
				t.Errorf("GetFleetByPlacementGroup(%s) = %s, %v; want fleet %s", id, f.ID, err, want)
			}
		}
		for _, id := range []string{"pg-", "pg%", "pg-b", "pg_", "x", ""} {
			if f, err := s.GetFleetByPlacementGroup(ctx, id); !errors.Is(err, ErrNotFound) {
				t.Errorf("GetFleetByPlacementGroup(%q) = %s, %v; want ErrNotFound", id, f.ID, err)
			}
		}
	})
}
