package main

import (
	"context"

	"github.com/spf13/cobra"

	"hoist/web"
	"hoist/web/client"
)

// newProjectListCmd is `hoist project list`: the projects the caller may
// read, with its role in each and the server's default one.
func newProjectListCmd() *cobra.Command {
	return listCmd(listing[web.ProjectRole]{
		cmd: &cobra.Command{
			Use:   "list",
			Short: "List the projects you may read, your role in each and the default one",
			Long: `List the projects the token may read on the server (GET /api/v1/projects),
by name, with its role in each; DEFAULT marks the server's default project,
which the commands on a project's objects address when neither --project,
HOIST_PROJECT nor the login config name one.

` + clientHelp + "\n\n" + exitHelp,
			Args: cobra.NoArgs,
		},
		what: "project list",
		fetch: func(ctx context.Context, c *client.Client, _ []string) ([]web.ProjectRole, error) {
			return c.Projects(ctx)
		},
		header: "NAME\tROLE\tDEFAULT",
		row: func(p web.ProjectRole) string {
			def := ""
			if p.Default {
				def = "yes"
			}
			return p.Name + "\t" + string(p.Role) + "\t" + def
		},
	})
}
