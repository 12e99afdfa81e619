package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"hoist/web"
	"hoist/web/client"
)

// newProjectCmd is `hoist project`: list lists the caller's projects
// (projectlist.go), the member subcommands manage who may do what in one.
func newProjectCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "project",
		Short: "List projects and manage their members on a running hoist server",
	}
	cmd.AddCommand(newProjectListCmd(), newProjectMemberCmd())
	return cmd
}

func newProjectMemberCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "member",
		Short: "Add, list and remove a project's members (its admins and managers)",
		Long: `Add, list and remove a project's members. Roles, as dstack's: admin (everything
in the project, including its members), manager (members but not admins,
secrets, held plans), user (runs: sync, stop, re-run) and viewer (read only).
Global admins have every role in every project.`,
	}
	cmd.AddCommand(newMemberAddCmd(), newMemberRmCmd(), newMemberListCmd())
	return cmd
}

func newMemberAddCmd() *cobra.Command {
	var o clientOptions
	var role string
	cmd := &cobra.Command{
		Use:   "add PROJECT USER",
		Short: "Give USER a role in PROJECT (or change it)",
		Long: `Give USER the --role (admin, manager, user or viewer) in PROJECT, replacing
any role it had there. Managers may not make admins.

` + clientHelp + "\n\n" + exitHelp,
		Args: cobra.ExactArgs(2),
	}
	cmd.Flags().StringVar(&role, "role", "user", "admin, manager, user or viewer")
	o.addFlags(cmd.Flags())
	check := func() error {
		switch web.Role(role) {
		case web.RoleAdmin, web.RoleManager, web.RoleUser, web.RoleViewer:
			return nil
		}
		return fmt.Errorf("invalid --role %q: must be admin, manager, user or viewer", role)
	}
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		c, err := o.connect(cmd, check)
		if err != nil {
			return err
		}
		if err := c.SetMember(cmd.Context(), args[0], web.Member{User: args[1], Role: web.Role(role)}); err != nil {
			return fmt.Errorf("project member: %w", err)
		}
		fmt.Fprintf(cmd.ErrOrStderr(), "%s is %s of %s\n", args[1], role, args[0])
		return nil
	}
	return cmd
}

func newMemberRmCmd() *cobra.Command {
	var o clientOptions
	cmd := &cobra.Command{
		Use:   "rm PROJECT USER",
		Short: "Take USER out of PROJECT",
		Long:  "Take USER out of PROJECT; its sessions and tokens lose the project at once.\n\n" + clientHelp + "\n\n" + exitHelp,
		Args:  cobra.ExactArgs(2),
	}
	o.addFlags(cmd.Flags())
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		c, err := o.connect(cmd)
		if err != nil {
			return err
		}
		if err := c.RemoveMember(cmd.Context(), args[0], args[1]); err != nil {
			return fmt.Errorf("project member: %w", err)
		}
		fmt.Fprintf(cmd.ErrOrStderr(), "%s removed from %s\n", args[1], args[0])
		return nil
	}
	return cmd
}

func newMemberListCmd() *cobra.Command {
	return listCmd(listing[web.Member]{
		cmd: &cobra.Command{
			Use:   "list PROJECT",
			Short: "List PROJECT's members and their roles",
			Long:  "List PROJECT's members and their roles.\n\n" + clientHelp + "\n\n" + exitHelp,
			Args:  cobra.ExactArgs(1),
		},
		what: "project member",
		fetch: func(ctx context.Context, c *client.Client, args []string) ([]web.Member, error) {
			return c.Members(ctx, args[0])
		},
		header: "USER\tROLE",
		row:    func(m web.Member) string { return m.User + "\t" + string(m.Role) },
	})
}
