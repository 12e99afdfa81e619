package client_test

import (
	"errors"
	"slices"
	"testing"

	"hoist/web"
	"hoist/web/client"
)

// TestClient_usersMembersAndTokensRoundTrip: creates (201) and deletes
// (204) are successes; a manager's limits come back as ErrForbidden.
func TestClient_usersMembersAndTokensRoundTrip(t *testing.T) {
	url, _ := server(t)
	ctx := t.Context()
	admin := &client.Client{BaseURL: url, Token: "admin-tok"}
	if _, err := admin.CreateUser(ctx, web.NewUser{Name: "ann"}); err != nil {
		t.Fatal(err)
	}
	if err := admin.SetMember(ctx, "main", web.Member{User: "ann", Role: web.RoleManager}); err != nil {
		t.Fatal(err)
	}
	tok, err := admin.CreateToken(ctx, web.NewToken{Name: "ci", User: "ann"})
	if err != nil || tok.Secret == "" {
		t.Fatalf("CreateToken = %+v, %v", tok, err)
	}
	ann := &client.Client{BaseURL: url, Token: tok.Secret}
	if err := ann.SetMember(ctx, "main", web.Member{User: "ann", Role: web.RoleAdmin}); !errors.Is(err, client.ErrForbidden) {
		t.Errorf("manager making an admin: %v, want ErrForbidden", err)
	}
	ms, err := ann.Members(ctx, "main")
	if err != nil || !slices.Contains(ms, web.Member{User: "ann", Role: web.RoleManager}) {
		t.Errorf("Members = %+v, %v", ms, err)
	}
	if err := admin.RemoveMember(ctx, "main", "ann"); err != nil {
		t.Fatal(err)
	}
	ts, err := ann.Tokens(ctx)
	if err != nil || len(ts) != 1 {
		t.Fatalf("Tokens = %+v, %v", ts, err)
	}
	if err := ann.RevokeToken(ctx, ts[0].ID); err != nil {
		t.Fatal(err)
	}
	if _, err := ann.Whoami(ctx); !errors.Is(err, client.ErrUnauthorized) {
		t.Errorf("revoked token: %v, want ErrUnauthorized", err)
	}
	if err := admin.DeleteUser(ctx, "ann"); err != nil {
		t.Fatal(err)
	}
	if err := admin.DeleteUser(ctx, "ann"); !errors.Is(err, client.ErrNotFound) {
		t.Errorf("deleting twice: %v, want ErrNotFound", err)
	}
}
