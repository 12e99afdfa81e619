package storeview_test

import (
	"errors"
	"testing"
	"time"

	"hoist/store"
	"hoist/web"
)

// TestView_sessionsReadTheirUserAgain stores sessions and reads them back:
// a user's session carries the user's roles as the store has them now, the
// admin token's stays an admin, and a session of a user that is gone ends.
func TestView_sessionsReadTheirUserAgain(t *testing.T) {
	v, _ := open(t)
	ctx := t.Context()
	exp := now.Add(time.Hour)
	for _, tc := range []struct {
		name string
		p    web.Principal
		want web.Principal
		err  error
	}{
		{"viewer", web.Principal{Name: "victor", Role: web.RoleUser},
			web.Principal{Name: "victor", Role: web.RoleUser, Projects: map[string]web.Role{store.DefaultProject: web.RoleViewer}}, nil},
		{"store admin", web.Principal{Name: "alice", Role: web.RoleAdmin}, web.Principal{Name: "alice", Role: web.RoleAdmin}, nil},
		{"admin token", web.Principal{Name: "admin", Role: web.RoleAdmin}, web.Principal{Name: "admin", Role: web.RoleAdmin}, nil},
		{"unknown user", web.Principal{Name: "ghost", Role: web.RoleUser}, web.Principal{}, web.ErrNotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id := "session-" + tc.name
			if err := v.CreateSession(ctx, id, tc.p, "csrf", exp); err != nil {
				t.Fatal(err)
			}
			got, csrf, _, err := v.GetSession(ctx, id)
			if tc.err != nil {
				if !errors.Is(err, tc.err) {
					t.Fatalf("error %v, want %v", err, tc.err)
				}
				return
			}
			if err != nil || csrf != "csrf" || got.Name != tc.want.Name || got.Role != tc.want.Role ||
				got.RoleIn(store.DefaultProject) != tc.want.RoleIn(store.DefaultProject) || len(got.Projects) != len(tc.want.Projects) {
				t.Errorf("got %+v %q %v, want %+v", got, csrf, err, tc.want)
			}
		})
	}
}
