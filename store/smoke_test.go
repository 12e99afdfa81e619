package store

import (
	"testing"
)

func TestSmoke(t *testing.T) {
	forEachDB(t, func(t *testing.T, s *Store, clock *fakeClock) {
		ctx := t.Context()
		r := &Run{Name: "train", Type: "task", Status: RunSubmitted, Spec: []byte(`{"b":1,"a":2}`)}
		if err := s.CreateRun(ctx, r); err != nil {
			t.Fatal(err)
		}
		got, err := s.GetRun(ctx, r.ID)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%+v loc=%v", got, got.SubmittedAt.Location())
		code := 3
		j := &Job{RunID: r.ID, Status: JobSubmitted, ExitCode: &code}
		if err := s.CreateJob(ctx, j); err != nil {
			t.Fatal(err)
		}
		gj, err := s.GetJob(ctx, j.ID)
		t.Logf("%+v %v", gj, err)
		rev := Revision{SHA: "abc", Errors: []string{"x", "y"}, Valid: false}
		if err := s.RecordRevision(ctx, rev); err != nil {
			t.Fatal(err)
		}
		gr, err := s.GetRevision(ctx, "abc")
		t.Logf("%+v %v", gr, err)
		i := &Instance{Name: "i", Status: InstancePending, OwnershipTags: map[string]string{"a": "b"}}
		if err := s.CreateInstance(ctx, i); err != nil {
			t.Fatal(err)
		}
		gi, err := s.GetInstance(ctx, i.ID)
		t.Logf("%+v %v", gi, err)
	})
}
