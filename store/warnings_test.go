package store

import (
	"slices"
	"testing"
)

func TestRevisions_warningsAreKeptAndReplaced(t *testing.T) {
	forEachDB(t, func(t *testing.T, s *Store, _ *fakeClock) {
		ctx := t.Context()
		w := []string{"a.dstack.yml:3:7: auth: `auth` has no effect"}
		if err := s.RecordRevision(ctx, Revision{SHA: "aaa", Valid: true, Warnings: w}); err != nil {
			t.Fatal(err)
		}
		got, err := s.GetRevision(ctx, DefaultProject, "aaa")
		if err != nil || !slices.Equal(got.Warnings, w) {
			t.Fatalf("GetRevision = %+v, %v; want warnings %q", got, err, w)
		}
		// Re-recording replaces them (a fixed spec has none).
		if err := s.RecordRevision(ctx, Revision{SHA: "aaa", Valid: true}); err != nil {
			t.Fatal(err)
		}
		if got, err = s.GetRevision(ctx, DefaultProject, "aaa"); err != nil || len(got.Warnings) != 0 {
			t.Fatalf("GetRevision after re-record = %+v, %v; want no warnings", got, err)
		}
	})
}
