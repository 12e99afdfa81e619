package store

import (
	"testing"
	"time"
)

func TestListSecrets_namesAndTimesWithoutValues(t *testing.T) {
	forEachDB(t, func(t *testing.T, s *Store, clock *fakeClock) {
		ctx := t.Context()
		created := clock.Now().UTC()
		if err := s.SetSecret(ctx, "", "HF_TOKEN", []byte("v1")); err != nil {
			t.Fatal(err)
		}
		if err := s.SetSecret(ctx, "", "A_KEY", []byte("x")); err != nil {
			t.Fatal(err)
		}
		clock.Advance(time.Hour)
		if err := s.SetSecret(ctx, "", "HF_TOKEN", []byte("v2")); err != nil {
			t.Fatal(err)
		}
		got, err := s.ListSecrets(ctx, "")
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 2 || got[0].Name != "A_KEY" || got[1].Name != "HF_TOKEN" {
			t.Fatalf("ListSecrets = %+v, want A_KEY then HF_TOKEN", got)
		}
		hf := got[1]
		if !hf.CreatedAt.Equal(created) || !hf.UpdatedAt.Equal(created.Add(time.Hour)) {
			t.Errorf("HF_TOKEN times = created %v updated %v, want %v and an hour later", hf.CreatedAt, hf.UpdatedAt, created)
		}
		if err := s.DeleteSecret(ctx, "", "A_KEY"); err != nil {
			t.Fatal(err)
		}
		if got, _ := s.ListSecrets(ctx, ""); len(got) != 1 {
			t.Errorf("after delete ListSecrets = %+v", got)
		}
	})
}
