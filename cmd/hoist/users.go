package main

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"hoist/web"
	"hoist/web/client"
)

func newUserCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "user",
		Short: "Add, list and remove users of a running hoist server (global admins)",
		Long: `Add, list and remove the users of a running hoist server. A user's global
role is admin (every project, users and tokens) or user (only the projects it
is a member of: see hoist project member). Only global admins manage users.`,
	}
	cmd.AddCommand(newUserAddCmd(), newUserListCmd(), newUserRmCmd())
	return cmd
}

func newUserAddCmd() *cobra.Command {
	var o clientOptions
	var admin bool
	cmd := &cobra.Command{
		Use:   "add NAME",
		Short: "Add a user (global role user, or admin with --admin)",
		Long: `Add user NAME with the global role user (no project until a project's
admin adds it: hoist project member add), or admin with --admin. Give it a
token with hoist token create NAME-laptop --user NAME.

` + clientHelp + "\n\n" + exitHelp,
		Args: cobra.ExactArgs(1),
	}
	cmd.Flags().BoolVar(&admin, "admin", false, "make the user a global admin")
	o.addFlags(cmd.Flags())
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		c, err := o.connect(cmd)
		if err != nil {
			return err
		}
		role := web.RoleUser
		if admin {
			role = web.RoleAdmin
		}
		if _, err := c.CreateUser(cmd.Context(), web.NewUser{Name: args[0], Role: role}); err != nil {
			return fmt.Errorf("user: %w", err)
		}
		fmt.Fprintf(cmd.ErrOrStderr(), "user %s added (%s)\n", args[0], role)
		return nil
	}
	return cmd
}

func newUserListCmd() *cobra.Command {
	return listCmd(listing[web.Account]{
		cmd: &cobra.Command{
			Use:   "list",
			Short: "List users with their global role and projects",
			Long:  "List users with their global role and their role in each project.\n\n" + clientHelp + "\n\n" + exitHelp,
			Args:  cobra.NoArgs,
		},
		what: "user",
		fetch: func(ctx context.Context, c *client.Client, _ []string) ([]web.Account, error) {
			return c.Users(ctx)
		},
		header: "NAME\tROLE\tPROJECTS",
		row: func(u web.Account) string {
			return u.Name + "\t" + string(u.Role) + "\t" + strings.Join(projectRoles(u.Projects), ",")
		},
	})
}

// projectRoles lists memberships as project=role, by project.
func projectRoles(m map[string]web.Role) []string {
	out := make([]string, 0, len(m))
	for p, r := range m {
		out = append(out, p+"="+string(r))
	}
	slices.Sort(out)
	return out
}

func newUserRmCmd() *cobra.Command {
	var o clientOptions
	cmd := &cobra.Command{
		Use:   "rm NAME",
		Short: "Remove a user with its tokens and memberships",
		Long:  "Remove user NAME; its tokens stop working and its sessions end at once.\n\n" + clientHelp + "\n\n" + exitHelp,
		Args:  cobra.ExactArgs(1),
	}
	o.addFlags(cmd.Flags())
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		c, err := o.connect(cmd)
		if err != nil {
			return err
		}
		if err := c.DeleteUser(cmd.Context(), args[0]); err != nil {
			return fmt.Errorf("user: %w", err)
		}
		fmt.Fprintf(cmd.ErrOrStderr(), "user %s removed\n", args[0])
		return nil
	}
	return cmd
}
