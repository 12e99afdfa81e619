package main

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"hoist/web/client"
)

func newLoginCmd() *cobra.Command {
	var server, token, output string
	cmd := &cobra.Command{
		Use:   "login --server URL --token TOKEN",
		Short: "Check a server's URL and token and save them for the other commands",
		Long: `Check that TOKEN authenticates at the hoist server at URL (GET
/api/v1/whoami), then write both to hoist/config.json under the user's config
directory ($XDG_CONFIG_HOME, else ~/.config), mode 0600. Every command that
calls a server reads it when neither its flags nor HOIST_URL and HOIST_TOKEN
say otherwise. The token may come from HOIST_TOKEN instead of --token, which
keeps it out of the shell's history.

` + exitHelp,
		Args: cobra.NoArgs,
	}
	check := outputFlag(cmd, &output)
	cmd.Flags().StringVar(&server, "server", "", "URL of the hoist server (required)")
	cmd.Flags().StringVar(&token, "token", "", "API token (default HOIST_TOKEN)")
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
		path, err := client.DefaultConfigPath()
		if err != nil {
			return err
		}
		if err := client.WriteConfig(path, client.Config{Server: c.BaseURL, Token: c.Token}); err != nil {
			return err
		}
		if output == "json" {
			return writeJSON(cmd.OutOrStdout(), who)
		}
		_, err = fmt.Fprintf(cmd.OutOrStdout(), "Logged in to %s as %s (%s); saved in %s\n", c.BaseURL, who.Name, who.Role, path)
		return err
	}
	return cmd
}
