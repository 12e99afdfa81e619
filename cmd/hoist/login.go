package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"hoist/web/client"
)

func newLoginCmd() *cobra.Command {
	var server, token, project, output string
	cmd := &cobra.Command{
		Use:   "login --server URL --token TOKEN [--project PROJECT]",
		Short: "Check a server's URL and token and save them for the other commands",
		Long: `Check that TOKEN authenticates at the hoist server at URL (GET
/api/v1/whoami), then write both to hoist/config.json under the user's config
directory ($XDG_CONFIG_HOME, else ~/.config), mode 0600. Every command that
calls a server reads it when neither its flags nor HOIST_URL and HOIST_TOKEN
say otherwise. The token may come from HOIST_TOKEN instead of --token, which
keeps it out of the shell's history. --project, which must be one of the
projects the token may read (GET /api/v1/projects), is saved too: the
commands on a project's objects address it on that server unless --project
or HOIST_PROJECT say otherwise; without it they address the server's
default project.

` + exitHelp,
		Args: cobra.NoArgs,
	}
	check := outputFlag(cmd, &output)
	cmd.Flags().StringVar(&server, "server", "", "URL of the hoist server (required)")
	cmd.Flags().StringVar(&token, "token", "", "API token (default HOIST_TOKEN)")
	cmd.Flags().StringVar(&project, "project", "", "the project the other commands address (default the server's default project)")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		if err := check(); err != nil {
			return err
		}
		if server == "" {
			return errors.New("login: give --server")
		}
		if token == "" {
			token = os.Getenv("HOIST_TOKEN")
		}
		if token == "" {
			return errors.New("login: give --token or set HOIST_TOKEN")
		}
		c := &client.Client{BaseURL: strings.TrimRight(server, "/"), Token: token}
		who, err := c.Whoami(cmd.Context())
		if err != nil {
			return fmt.Errorf("login: %w", err)
		}
		if project != "" {
			if err := checkProject(cmd.Context(), c, project); err != nil {
				return fmt.Errorf("login: %w", err)
			}
		}
		path, err := client.DefaultConfigPath()
		if err != nil {
			return err
		}
		if err := client.WriteConfig(path, client.Config{Server: c.BaseURL, Token: c.Token, Project: project}); err != nil {
			return err
		}
		if output == "json" {
			return writeJSON(cmd.OutOrStdout(), who)
		}
		in := ""
		if project != "" {
			in = ", project " + project
		}
		_, err = fmt.Fprintf(cmd.OutOrStdout(), "Logged in to %s as %s (%s%s); saved in %s\n", c.BaseURL, who.Name, who.Role, in, path)
		return err
	}
	return cmd
}

// checkProject fails unless the caller may read project on c's server.
func checkProject(ctx context.Context, c *client.Client, project string) error {
	ps, err := c.Projects(ctx)
	if err != nil {
		return err
	}
	names := make([]string, len(ps))
	for i, p := range ps {
		if p.Name == project {
			return nil
		}
		names[i] = p.Name
	}
	return fmt.Errorf("project %q is not one of yours on %s (%s)", project, c.BaseURL, strings.Join(names, ", "))
}
