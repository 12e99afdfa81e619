package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"hoist/web/client"
)

// clientHelp is the part of every API command's help that says where the
// server and the token come from, and what the exit codes mean.
const clientHelp = `The server is --server (else HOIST_URL, else the config file of
` + "`hoist login`" + `, else ` + client.DefaultServer + `); the token is --token (else
HOIST_TOKEN, else the config file, else HOIST_ADMIN_TOKEN, else the admin
token in --data-dir). HOIST_SERVER (HOIST_URL's older name) and
HOIST_DATA_DIR set those flags when they are not given. Commands on a
project's objects (runs, logs, secrets, plans, …) address --project (else
HOIST_PROJECT, else the config file's project when the server is the config
file's, else the server's default project).`

// exitHelp documents the exit codes every API command shares.
const exitHelp = `Exit codes: 0 success, 1 error (including unauthorized and forbidden),
3 the named object does not exist.`

// clientOptions are the flags every command that calls a server shares.
type clientOptions struct {
	server, token, dataDir string
	// project is --project, registered only by commands on a project's
	// objects (addProjectFlags).
	project string
}

// addFlags registers --server, --token and --data-dir on fs.
func (o *clientOptions) addFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.server, "server", "", "URL of the hoist server (default HOIST_URL, the login config or "+client.DefaultServer+")")
	fs.StringVar(&o.token, "token", "", "API token (default HOIST_TOKEN, the login config, HOIST_ADMIN_TOKEN or <data-dir>/admin-token)")
	fs.StringVar(&o.dataDir, "data-dir", defaultDataDir(), "where to find the local server's admin token")
}

// addProjectFlags registers addFlags' flags and --project on fs, for the
// commands whose routes belong to a project (web/API.md "Projects").
func (o *clientOptions) addProjectFlags(fs *pflag.FlagSet) {
	o.addFlags(fs)
	fs.StringVar(&o.project, "project", "", "the project to address (default HOIST_PROJECT, the login config's project or the server's default project)")
}

// applyEnv sets --server and --data-dir from HOIST_SERVER and
// HOIST_DATA_DIR when they were not given (only those: a command's other
// flags take no environment).
func (o *clientOptions) applyEnv(fs *pflag.FlagSet) error {
	for _, name := range []string{"server", "data-dir"} {
		f := fs.Lookup(name)
		if f == nil || f.Changed {
			continue
		}
		env := "HOIST_" + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
		if v, ok := os.LookupEnv(env); ok && v != "" {
			if err := fs.Set(name, v); err != nil {
				return fmt.Errorf("%s: %w", env, err)
			}
		}
	}
	return nil
}

// prepare is the start of every API command's RunE: the environment's
// flags (applyEnv), then checks of the command's own flags (e.g. the one
// outputFlag returns), in order.
func (o *clientOptions) prepare(cmd *cobra.Command, checks ...func() error) error {
	if err := o.applyEnv(cmd.Flags()); err != nil {
		return err
	}
	for _, check := range checks {
		if err := check(); err != nil {
			return err
		}
	}
	return nil
}

// connect is prepare followed by client.
func (o *clientOptions) connect(cmd *cobra.Command, checks ...func() error) (*client.Client, error) {
	if err := o.prepare(cmd, checks...); err != nil {
		return nil, err
	}
	return o.client()
}

// client resolves the server and token as clientHelp says.
func (o *clientOptions) client() (*client.Client, error) {
	return client.New(client.Options{Server: o.server, Token: o.token, Project: o.project, DataDir: o.dataDir})
}

// outputFlag registers -o/--output (table or json) on cmd and returns a
// check for its value, to call first in RunE.
func outputFlag(cmd *cobra.Command, output *string) func() error {
	cmd.Flags().StringVarP(output, "output", "o", "table", "output format: table or json")
	return func() error {
		if *output != "table" && *output != "json" {
			return fmt.Errorf("invalid --output %q: must be table or json", *output)
		}
		return nil
	}
}
