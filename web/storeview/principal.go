package storeview

import (
	"hoist/store"
	"hoist/web"
)

// principalOf is the web principal of a store user. Until users are members
// of projects, a store admin is a global admin and any other user has its
// store role in the default project (store.DefaultProject) and none
// elsewhere; project memberships replace this one mapping.
func principalOf(u store.User) web.Principal {
	if web.Role(u.Role) == web.RoleAdmin {
		return web.Principal{Name: u.Name, Role: web.RoleAdmin}
	}
	return web.Principal{Name: u.Name, Role: web.RoleUser,
		Projects: map[string]web.Role{store.DefaultProject: web.Role(u.Role)}}
}
