package store

import (
	"errors"
	"slices"
	"testing"
	"time"
)

// TestGatewayToken_sealedAndBoundToTheGateway: a gateway's admin token is
// stored sealed, opens with the key it was sealed with, not with another
// key, and not for another gateway.
func TestGatewayToken_sealedAndBoundToTheGateway(t *testing.T) {
	forEachDB(t, func(t *testing.T, s *Store, _ *fakeClock) {
		g := Gateway{Name: "gw", Status: GatewaySubmitted}
		if err := s.CreateGateway(t.Context(), &g); err != nil {
			t.Fatal(err)
		}
		if err := s.SealGatewayToken(&g, "tok-123"); err != nil {
			t.Fatal(err)
		}
		g.InstanceID = "inst-1"
		if err := s.UpdateGateway(t.Context(), &g); err != nil {
			t.Fatal(err)
		}
		got, err := s.GetGateway(t.Context(), g.ID)
		if err != nil {
			t.Fatal(err)
		}
		if tok, err := s.GatewayToken(got); err != nil || tok != "tok-123" {
			t.Fatalf("token = %q, %v; want tok-123", tok, err)
		}
		if got.AdminToken == "" || got.AdminToken == "tok-123" {
			t.Fatalf("stored admin token %q, want it sealed", got.AdminToken)
		}
		other := got
		other.ID = "another"
		if _, err := s.GatewayToken(other); !errors.Is(err, ErrSecretKey) {
			t.Errorf("opened for another gateway: %v, want ErrSecretKey", err)
		}
		if err := s.setKey([]byte("fedcba9876543210fedcba9876543210")); err != nil {
			t.Fatal(err)
		}
		if _, err := s.GatewayToken(got); !errors.Is(err, ErrSecretKey) {
			t.Errorf("opened with another key: %v, want ErrSecretKey", err)
		}
		if byInst, err := s.GatewayOfInstance(t.Context(), "inst-1"); err != nil || byInst.ID != g.ID {
			t.Errorf("gateway of inst-1 = %+v, %v", byInst, err)
		}
		if _, err := s.GatewayOfInstance(t.Context(), "nope"); !errors.Is(err, ErrNotFound) {
			t.Errorf("gateway of an unknown instance: %v, want ErrNotFound", err)
		}
	})
}

// TestValidTokens_leavesOutRevokedExpiredAndDisabled: the tokens a gateway
// accepts are those LookupToken accepts.
func TestValidTokens_leavesOutRevokedExpiredAndDisabled(t *testing.T) {
	forEachDB(t, func(t *testing.T, s *Store, clock *fakeClock) {
		ctx := t.Context()
		u, err := s.CreateUser(ctx, "alice", "admin")
		if err != nil {
			t.Fatal(err)
		}
		_, keep, err := s.CreateToken(ctx, u.ID, "keep", time.Time{})
		if err != nil {
			t.Fatal(err)
		}
		_, soon, err := s.CreateToken(ctx, u.ID, "soon", clock.Now().Add(time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		_, gone, err := s.CreateToken(ctx, u.ID, "gone", clock.Now().Add(time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		_, revoked, err := s.CreateToken(ctx, u.ID, "revoked", time.Time{})
		if err != nil {
			t.Fatal(err)
		}
		if err := s.RevokeToken(ctx, revoked.ID); err != nil {
			t.Fatal(err)
		}
		bob, err := s.CreateUser(ctx, "bob", "admin")
		if err != nil {
			t.Fatal(err)
		}
		_, bobs, err := s.CreateToken(ctx, bob.ID, "bob", time.Time{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.db.NewUpdate().Model((*User)(nil)).Set("disabled = ?", true).Where("id = ?", bob.ID).Exec(ctx); err != nil {
			t.Fatal(err)
		}
		// A user's token counts in the projects it is a member of only.
		ann, err := s.CreateUser(ctx, "ann", "user")
		if err != nil {
			t.Fatal(err)
		}
		_, anns, err := s.CreateToken(ctx, ann.ID, "ann", time.Time{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.SetMember(ctx, "beta", "ann", RoleViewer); err != nil {
			t.Fatal(err)
		}
		if ts, err := s.ValidTokens(ctx, "beta"); err != nil || !slices.ContainsFunc(ts, func(tk APIToken) bool { return tk.TokenHash == anns.TokenHash }) {
			t.Fatalf("beta's valid tokens = %v, %v; want ann's among them", ts, err)
		}
		clock.Advance(2 * time.Minute)
		ts, err := s.ValidTokens(ctx, DefaultProject)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, tk := range ts {
			got = append(got, tk.TokenHash)
		}
		if len(got) != 2 || !contains(got, keep.TokenHash) || !contains(got, soon.TokenHash) || contains(got, gone.TokenHash) || contains(got, bobs.TokenHash) {
			t.Fatalf("valid tokens = %v, want keep and soon", got)
		}
	})
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
