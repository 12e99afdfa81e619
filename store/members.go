package store

import (
	"context"
	"fmt"

	"github.com/uptrace/bun"
)

// ValidMemberRole reports whether role is a project role: RoleAdmin,
// RoleManager, RoleUser or RoleViewer.
func ValidMemberRole(role string) bool {
	switch role {
	case RoleAdmin, RoleManager, RoleUser, RoleViewer:
		return true
	}
	return false
}

// SetMember gives the named user the role in the project, replacing any
// role it had there. An unknown user returns ErrNotFound.
func (s *Store) SetMember(ctx context.Context, project, userName, role string) (Member, error) {
	if project == "" {
		return Member{}, fmt.Errorf("set member: project %w", errEmptyName)
	}
	if !ValidMemberRole(role) {
		return Member{}, fmt.Errorf("set member %s of %s: role %q is not admin, manager, user or viewer", userName, project, role)
	}
	u, err := s.GetUser(ctx, userName)
	if err != nil {
		return Member{}, err
	}
	m := Member{Project: project, UserID: u.ID, UserName: u.Name, Role: role, CreatedAt: s.Now()}
	_, err = s.db.NewInsert().Model(&m).
		On("CONFLICT (project, user_id) DO UPDATE").Set("role = EXCLUDED.role").
		Exec(ctx)
	if err != nil {
		return m, fmt.Errorf("set member %s of %s: %w", userName, project, err)
	}
	return m, nil
}

// RemoveMember takes the named user out of the project; ErrNotFound when
// it was not a member.
func (s *Store) RemoveMember(ctx context.Context, project, userName string) error {
	res, err := s.db.NewDelete().Model((*Member)(nil)).
		Where("project = ?", project).
		Where("user_id IN (SELECT id FROM users WHERE name = ?)", userName).
		Exec(ctx)
	if err != nil {
		return fmt.Errorf("remove member %s of %s: %w", userName, project, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("remove member %s of %s: %w", userName, project, ErrNotFound)
	}
	return nil
}

// ListMembers returns the project's members ordered by user name.
func (s *Store) ListMembers(ctx context.Context, project string) ([]Member, error) {
	var ms []Member
	err := s.db.NewSelect().Model(&ms).
		ColumnExpr("m.*, u.name AS user_name").
		ModelTableExpr("project_members AS m").
		Join("JOIN users AS u ON u.id = m.user_id").
		Where("m.project = ?", project).
		OrderExpr("u.name").Scan(ctx)
	if err != nil {
		return nil, fmt.Errorf("list members of %s: %w", project, err)
	}
	return ms, nil
}

// MembershipsOf returns the user's memberships ordered by project.
func (s *Store) MembershipsOf(ctx context.Context, userID string) ([]Member, error) {
	var ms []Member
	err := s.db.NewSelect().Model(&ms).
		ColumnExpr("m.*, u.name AS user_name").
		ModelTableExpr("project_members AS m").
		Join("JOIN users AS u ON u.id = m.user_id").
		Where("m.user_id = ?", userID).
		OrderExpr("m.project").Scan(ctx)
	if err != nil {
		return nil, fmt.Errorf("list memberships of %s: %w", userID, err)
	}
	return ms, nil
}

// DeleteUser removes the named user with its tokens and memberships (the
// foreign keys cascade); ErrNotFound when there is none.
func (s *Store) DeleteUser(ctx context.Context, name string) error {
	u, err := s.GetUser(ctx, name)
	if err != nil {
		return err
	}
	// Delete dependents explicitly too: a cascade needs SQLite's
	// foreign_keys pragma, which a connection opened elsewhere may lack.
	return s.db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		if _, err := tx.NewDelete().Model((*Member)(nil)).Where("user_id = ?", u.ID).Exec(ctx); err != nil {
			return fmt.Errorf("delete user %s: memberships: %w", name, err)
		}
		if _, err := tx.NewDelete().Model((*APIToken)(nil)).Where("user_id = ?", u.ID).Exec(ctx); err != nil {
			return fmt.Errorf("delete user %s: tokens: %w", name, err)
		}
		if _, err := tx.NewDelete().Model((*User)(nil)).Where("id = ?", u.ID).Exec(ctx); err != nil {
			return fmt.Errorf("delete user %s: %w", name, err)
		}
		return nil
	})
}

// MemberProjects returns the names of the projects that have members,
// sorted.
func (s *Store) MemberProjects(ctx context.Context) ([]string, error) {
	var names []string
	err := s.db.NewSelect().Model((*Member)(nil)).Distinct().Column("project").OrderExpr("project").Scan(ctx, &names)
	if err != nil {
		return nil, fmt.Errorf("list member projects: %w", err)
	}
	return names, nil
}
