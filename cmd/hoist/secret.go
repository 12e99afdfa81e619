package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"hoist/web"
)

func newSecretCmd() *cobra.Command {
	var o clientOptions
	cmd := &cobra.Command{
		Use:   "secret",
		Short: "Manage the secrets specs reference as ${{ secrets.NAME }} on a running hoist server",
		Long: `Set, read, list and delete the project's secrets on a running hoist server.
Specs reference them as ${{ secrets.NAME }} in env values, registry_auth and
SSH fleet identity_file, and env: [NAME] takes NAME from them.

Values are never taken from the command line (it shows in ps and shell
history): set reads standard input, or the file given with --from-file.

Viewers may list names only.

` + clientHelp + "\n\n" + exitHelp,
		PersistentPreRunE: func(cmd *cobra.Command, args []string) error {
			return applyEnv(cmd.Flags())
		},
	}
	o.addProjectFlags(cmd.PersistentFlags())

	var fromFile string
	set := &cobra.Command{
		Use:   "set NAME",
		Short: "Create or replace a secret; the value comes from stdin or --from-file",
		Long: `Create or replace secret NAME. The value is read from standard input (one
trailing newline, as echo and here-strings add, is dropped; at a terminal the
value is read without echo) or, with --from-file, is the file's exact bytes.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			value, err := readSecretValue(cmd, fromFile)
			if err != nil {
				return err
			}
			c, err := o.client()
			if err != nil {
				return err
			}
			if err := c.SetSecret(cmd.Context(), args[0], string(value)); err != nil {
				return fmt.Errorf("secret: %w", err)
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "secret %s set\n", args[0])
			return nil
		},
	}
	set.Flags().StringVar(&fromFile, "from-file", "", "read the value from this file (exact bytes) instead of stdin")

	get := &cobra.Command{
		Use:   "get NAME",
		Short: "Print a secret's value (exact bytes, no newline added)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := o.client()
			if err != nil {
				return err
			}
			v, err := c.Secret(cmd.Context(), args[0])
			if err != nil {
				return fmt.Errorf("secret: %w", err)
			}
			_, err = io.WriteString(cmd.OutOrStdout(), v)
			return err
		},
	}

	var output string
	list := &cobra.Command{
		Use:   "list",
		Short: "List secret names and when they were set (never values)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if output != "table" && output != "json" {
				return fmt.Errorf("invalid --output %q: must be table or json", output)
			}
			c, err := o.client()
			if err != nil {
				return err
			}
			list, err := c.Secrets(cmd.Context())
			if err != nil {
				return fmt.Errorf("secret: %w", err)
			}
			if list == nil {
				list = []web.Secret{}
			}
			if output == "json" {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(list)
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "NAME\tUPDATED")
			for _, s := range list {
				fmt.Fprintf(tw, "%s\t%s\n", s.Name, s.UpdatedAt.UTC().Format(time.RFC3339))
			}
			return tw.Flush()
		},
	}
	list.Flags().StringVarP(&output, "output", "o", "table", "output format: table or json")

	del := &cobra.Command{
		Use:   "delete NAME",
		Short: "Delete a secret",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := o.client()
			if err != nil {
				return err
			}
			if err := c.DeleteSecret(cmd.Context(), args[0]); err != nil {
				return fmt.Errorf("secret: %w", err)
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "secret %s deleted\n", args[0])
			return nil
		},
	}
	cmd.AddCommand(set, get, list, del)
	return cmd
}

// readSecretValue reads a value from --from-file (exact bytes) or stdin
// (without echo at a terminal; one trailing newline dropped).
func readSecretValue(cmd *cobra.Command, fromFile string) ([]byte, error) {
	if fromFile != "" {
		b, err := os.ReadFile(fromFile)
		if err != nil {
			return nil, fmt.Errorf("read --from-file: %w", err)
		}
		return b, nil
	}
	in := cmd.InOrStdin()
	var b []byte
	var err error
	if f, ok := in.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		fmt.Fprint(cmd.ErrOrStderr(), "value (not echoed): ")
		b, err = term.ReadPassword(int(f.Fd()))
		fmt.Fprintln(cmd.ErrOrStderr())
	} else {
		b, err = io.ReadAll(io.LimitReader(in, 1<<20))
	}
	if err != nil {
		return nil, fmt.Errorf("read the value from stdin: %w", err)
	}
	b = bytes.TrimSuffix(b, []byte("\n"))
	b = bytes.TrimSuffix(b, []byte("\r"))
	if len(b) == 0 {
		return nil, errors.New("empty value on stdin: pipe the value in, or use --from-file")
	}
	return b, nil
}
