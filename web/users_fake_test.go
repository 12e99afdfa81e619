package web

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"
)

// memUsers keeps users, members and tokens in memory for the route table;
// users_store_test.go runs the same API over the real store.
type memUsers struct {
	mu      sync.Mutex
	users   map[string]Role
	members map[string]map[string]Role // project → user → role
	tokens  []Token
}

func newMemUsers() *memUsers {
	return &memUsers{
		users:   map[string]Role{"ursula": RoleUser, "vic": RoleUser},
		members: map[string]map[string]Role{"main": {"ursula": RoleUser, "vic": RoleViewer}},
	}
}

func (m *memUsers) Principal(_ context.Context, name string) (Principal, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	r, ok := m.users[name]
	if !ok {
		return Principal{}, ErrNotFound
	}
	p := Principal{Name: name, Role: r, Projects: map[string]Role{}}
	for proj, ms := range m.members {
		if mr, ok := ms[name]; ok {
			p.Projects[proj] = mr
		}
	}
	return p, nil
}

func (m *memUsers) ListUsers(ctx context.Context) ([]Account, error) {
	m.mu.Lock()
	names := slices.Sorted(maps.Keys(m.users))
	m.mu.Unlock()
	var out []Account
	for _, n := range names {
		p, _ := m.Principal(ctx, n)
		out = append(out, Account{Name: n, Role: p.Role, Projects: p.Projects})
	}
	return out, nil
}

func (m *memUsers) CreateUser(_ context.Context, name string, role Role) (Account, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.users[name]; ok {
		return Account{}, ErrConflict
	}
	m.users[name] = role
	return Account{Name: name, Role: role}, nil
}

func (m *memUsers) DeleteUser(_ context.Context, name string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.users[name]; !ok {
		return ErrNotFound
	}
	delete(m.users, name)
	for _, ms := range m.members {
		delete(ms, name)
	}
	return nil
}

func (m *memUsers) ListProjects(context.Context) ([]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Sorted(maps.Keys(m.members)), nil
}

func (m *memUsers) ListMembers(_ context.Context, project string) ([]Member, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []Member
	for _, u := range slices.Sorted(maps.Keys(m.members[project])) {
		out = append(out, Member{User: u, Role: m.members[project][u]})
	}
	return out, nil
}

func (m *memUsers) SetMember(_ context.Context, project, user string, role Role) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.users[user]; !ok {
		return ErrNotFound
	}
	if m.members[project] == nil {
		m.members[project] = map[string]Role{}
	}
	m.members[project][user] = role
	return nil
}

func (m *memUsers) RemoveMember(_ context.Context, project, user string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.members[project][user]; !ok {
		return ErrNotFound
	}
	delete(m.members[project], user)
	return nil
}

func (m *memUsers) ListTokens(_ context.Context, user string) ([]Token, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []Token
	for _, t := range m.tokens {
		if user == "" || t.User == user {
			out = append(out, t)
		}
	}
	return out, nil
}

func (m *memUsers) GetToken(_ context.Context, id string) (Token, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, t := range m.tokens {
		if t.ID == id {
			return t, nil
		}
	}
	return Token{}, ErrNotFound
}

func (m *memUsers) CreateToken(_ context.Context, user, name string, _ time.Time) (string, Token, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.users[user]; !ok {
		return "", Token{}, ErrNotFound
	}
	for _, t := range m.tokens {
		if t.User == user && t.Name == name {
			return "", Token{}, ErrConflict
		}
	}
	t := Token{ID: fmt.Sprintf("tok-%d", len(m.tokens)), Name: name, User: user, CreatedAt: t0}
	m.tokens = append(m.tokens, t)
	return "secret-" + t.ID, t, nil
}

func (m *memUsers) RevokeToken(_ context.Context, id string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for i := range m.tokens {
		if m.tokens[i].ID == id {
			m.tokens[i].Revoked = true
			return nil
		}
	}
	return ErrNotFound
}
