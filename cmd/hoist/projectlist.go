package main

import (
	"fmt"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"hoist/web"
)

// newProjectListCmd is `hoist project list`: the projects the caller may
// read, with its role in each and the server's default one.
func newProjectListCmd() *cobra.Command {
	var o clientOptions
	var output string
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List the projects you may read, your role in each and the default one",
		Long: `List the projects the token may read on the server (GET /api/v1/projects),
by name, with its role in each; DEFAULT marks the server's default project,
which the commands on a project's objects address when neither --project,
HOIST_PROJECT nor the login config name one.

` + clientHelp + "\n\n" + exitHelp,
		Args: cobra.NoArgs,
	}
	check := outputFlag(cmd, &output)
	o.addFlags(cmd.Flags())
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		c, err := o.connect(cmd, check)
		if err != nil {
			return err
		}
		ps, err := c.Projects(cmd.Context())
		if err != nil {
			return fmt.Errorf("project list: %w", err)
		}
		if ps == nil {
			ps = []web.ProjectRole{}
		}
		if output == "json" {
			return writeJSON(cmd.OutOrStdout(), ps)
		}
		tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "NAME\tROLE\tDEFAULT")
		for _, p := range ps {
			def := ""
			if p.Default {
				def = "yes"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\n", p.Name, p.Role, def)
		}
		return tw.Flush()
	}
	return cmd
}
