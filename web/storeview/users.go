package storeview

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"hoist/store"
	"hoist/web"
)

var _ web.Users = (*View)(nil)

// mapUserErr is mapErr that also turns store.ErrConflict into
// web.ErrConflict.
func mapUserErr(err error) error {
	if errors.Is(err, store.ErrConflict) {
		return fmt.Errorf("%w: %s", web.ErrConflict, err.Error())
	}
	return mapErr(err)
}

// principalOf builds a user's principal with its memberships.
func (v *View) principalOf(ctx context.Context, u store.User) (web.Principal, error) {
	if u.Disabled {
		return web.Principal{}, fmt.Errorf("user %s is disabled: %w", u.Name, web.ErrNotFound)
	}
	ms, err := v.st.MembershipsOf(ctx, u.ID)
	if err != nil {
		return web.Principal{}, err
	}
	p := web.Principal{Name: u.Name, Role: web.Role(u.Role)}
	if len(ms) > 0 {
		p.Projects = make(map[string]web.Role, len(ms))
		for _, m := range ms {
			p.Projects[m.Project] = web.Role(m.Role)
		}
	}
	return p, nil
}

// Principal implements web.Users.
func (v *View) Principal(ctx context.Context, name string) (web.Principal, error) {
	u, err := v.st.GetUser(ctx, name)
	if err != nil {
		return web.Principal{}, mapErr(err)
	}
	return v.principalOf(ctx, u)
}

// ListUsers implements web.Users.
func (v *View) ListUsers(ctx context.Context) ([]web.Account, error) {
	us, err := v.st.ListUsers(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]web.Account, 0, len(us))
	for _, u := range us {
		p, err := v.principalOf(ctx, store.User{ID: u.ID, Name: u.Name, Role: u.Role})
		if err != nil {
			return nil, err
		}
		out = append(out, web.Account{Name: u.Name, Role: p.Role, Projects: p.Projects, CreatedAt: u.CreatedAt.UTC()})
	}
	return out, nil
}

// CreateUser implements web.Users.
func (v *View) CreateUser(ctx context.Context, name string, role web.Role) (web.Account, error) {
	u, err := v.st.CreateUser(ctx, name, string(role))
	if err != nil {
		return web.Account{}, mapUserErr(err)
	}
	return web.Account{Name: u.Name, Role: web.Role(u.Role), CreatedAt: u.CreatedAt.UTC()}, nil
}

// DeleteUser implements web.Users.
func (v *View) DeleteUser(ctx context.Context, name string) error {
	return mapErr(v.st.DeleteUser(ctx, name))
}

// ListProjects implements web.Users: the store's projects, those that have
// members, and the default project.
func (v *View) ListProjects(ctx context.Context) ([]string, error) {
	ps, err := v.st.ListProjects(ctx)
	if err != nil {
		return nil, err
	}
	names := []string{v.project}
	for _, p := range ps {
		names = append(names, p.Name)
	}
	withMembers, err := v.st.MemberProjects(ctx)
	if err != nil {
		return nil, err
	}
	names = append(names, withMembers...)
	slices.Sort(names)
	return slices.Compact(names), nil
}

// ListMembers implements web.Users.
func (v *View) ListMembers(ctx context.Context, project string) ([]web.Member, error) {
	ms, err := v.st.ListMembers(ctx, project)
	if err != nil {
		return nil, err
	}
	out := make([]web.Member, len(ms))
	for i, m := range ms {
		out[i] = web.Member{User: m.UserName, Role: web.Role(m.Role)}
	}
	return out, nil
}

// SetMember implements web.Users.
func (v *View) SetMember(ctx context.Context, project, user string, role web.Role) error {
	_, err := v.st.SetMember(ctx, project, user, string(role))
	return mapErr(err)
}

// RemoveMember implements web.Users.
func (v *View) RemoveMember(ctx context.Context, project, user string) error {
	return mapErr(v.st.RemoveMember(ctx, project, user))
}

func tokenOf(t store.TokenInfo) web.Token {
	out := web.Token{ID: t.ID, Name: t.Name, User: t.UserName, CreatedAt: t.CreatedAt.UTC(), Revoked: t.Revoked}
	if !t.ExpiresAt.IsZero() {
		e := t.ExpiresAt.UTC()
		out.ExpiresAt = &e
	}
	if !t.LastUsedAt.IsZero() {
		l := t.LastUsedAt.UTC()
		out.LastUsedAt = &l
	}
	return out
}

// ListTokens implements web.Users.
func (v *View) ListTokens(ctx context.Context, user string) ([]web.Token, error) {
	id := ""
	if user != "" {
		u, err := v.st.GetUser(ctx, user)
		if errors.Is(err, store.ErrNotFound) {
			return []web.Token{}, nil
		}
		if err != nil {
			return nil, err
		}
		id = u.ID
	}
	ts, err := v.st.ListTokens(ctx, id)
	if err != nil {
		return nil, err
	}
	out := make([]web.Token, len(ts))
	for i, t := range ts {
		out[i] = tokenOf(t)
	}
	return out, nil
}

// GetToken implements web.Users.
func (v *View) GetToken(ctx context.Context, id string) (web.Token, error) {
	t, err := v.st.GetToken(ctx, id)
	if err != nil {
		return web.Token{}, mapErr(err)
	}
	return tokenOf(t), nil
}

// CreateToken implements web.Users.
func (v *View) CreateToken(ctx context.Context, user, name string, expires time.Time) (string, web.Token, error) {
	u, err := v.st.GetUser(ctx, user)
	if err != nil {
		return "", web.Token{}, mapErr(err)
	}
	plain, t, err := v.st.CreateToken(ctx, u.ID, name, expires)
	if err != nil {
		return "", web.Token{}, mapUserErr(err)
	}
	return plain, tokenOf(store.TokenInfo{ID: t.ID, UserID: t.UserID, UserName: u.Name, Name: t.Name,
		CreatedAt: t.CreatedAt, ExpiresAt: t.ExpiresAt}), nil
}

// RevokeToken implements web.Users.
func (v *View) RevokeToken(ctx context.Context, id string) error {
	return mapErr(v.st.RevokeToken(ctx, id))
}
