package client

import (
	"context"
	"net/http"
	"net/url"

	"hoist/web"
)

// Projects lists the projects the caller may read, by name, with its role
// in each and which one is the server's default (GET /api/v1/projects).
func (c *Client) Projects(ctx context.Context) ([]web.ProjectRole, error) {
	var out []web.ProjectRole
	return out, c.call(ctx, http.MethodGet, globalPath("/projects"), nil, nil, &out)
}

// Users lists users with their memberships (GET /api/v1/users; global
// admins).
func (c *Client) Users(ctx context.Context) ([]web.Account, error) {
	var out []web.Account
	return out, c.call(ctx, http.MethodGet, globalPath("/users"), nil, nil, &out)
}

// CreateUser adds a user with global role admin or user (POST
// /api/v1/users; global admins).
func (c *Client) CreateUser(ctx context.Context, u web.NewUser) (web.Account, error) {
	var out web.Account
	return out, c.call(ctx, http.MethodPost, globalPath("/users"), nil, u, &out)
}

// DeleteUser removes a user with its tokens and memberships (DELETE
// /api/v1/users/{name}; global admins).
func (c *Client) DeleteUser(ctx context.Context, name string) error {
	return c.call(ctx, http.MethodDelete, globalPath("/users/"+url.PathEscape(name)), nil, nil, nil)
}

// Members lists a project's members (GET
// /api/v1/projects/{project}/members; the project's admins and managers).
func (c *Client) Members(ctx context.Context, project string) ([]web.Member, error) {
	var out []web.Member
	return out, c.call(ctx, http.MethodGet, globalPath("/projects/"+url.PathEscape(project)+"/members"), nil, nil, &out)
}

// SetMember gives a user a role in a project (POST
// /api/v1/projects/{project}/members).
func (c *Client) SetMember(ctx context.Context, project string, m web.Member) error {
	return c.call(ctx, http.MethodPost, globalPath("/projects/"+url.PathEscape(project)+"/members"), nil, m, nil)
}

// RemoveMember takes a user out of a project (DELETE
// /api/v1/projects/{project}/members/{user}).
func (c *Client) RemoveMember(ctx context.Context, project, user string) error {
	return c.call(ctx, http.MethodDelete, globalPath("/projects/"+url.PathEscape(project)+"/members/"+url.PathEscape(user)), nil, nil, nil)
}

// Tokens lists the caller's API tokens, or everyone's for a global admin
// (GET /api/v1/tokens).
func (c *Client) Tokens(ctx context.Context) ([]web.Token, error) {
	var out []web.Token
	return out, c.call(ctx, http.MethodGet, globalPath("/tokens"), nil, nil, &out)
}

// CreateToken issues a token and returns it with its secret, shown this
// once (POST /api/v1/tokens).
func (c *Client) CreateToken(ctx context.Context, t web.NewToken) (web.CreatedToken, error) {
	var out web.CreatedToken
	return out, c.call(ctx, http.MethodPost, globalPath("/tokens"), nil, t, &out)
}

// RevokeToken revokes a token by id (DELETE /api/v1/tokens/{id}).
func (c *Client) RevokeToken(ctx context.Context, id string) error {
	return c.call(ctx, http.MethodDelete, globalPath("/tokens/"+url.PathEscape(id)), nil, nil, nil)
}
