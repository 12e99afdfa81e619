package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"hoist/web"
)

// secretClientOptions are the flags every `hoist secret` command shares.
type secretClientOptions struct {
	server, token, dataDir string
}

func newSecretCmd() *cobra.Command {
	var o secretClientOptions
	cmd := &cobra.Command{
		Use:   "secret",
		Short: "Manage the secrets specs reference as ${{ secrets.NAME }} on a running hoist server",
		Long: `Set, read, list and delete the project's secrets on a running hoist server.
Specs reference them as ${{ secrets.NAME }} in env values, registry_auth and
SSH fleet identity_file, and env: [NAME] takes NAME from them.

Values are never taken from the command line (it shows in ps and shell
history): set reads standard input, or the file given with --from-file.

The server is --server (HOIST_SERVER, default http://127.0.0.1:8080); the
token is --token (HOIST_TOKEN, then HOIST_ADMIN_TOKEN, then the admin token in
--data-dir). Viewers may list names only.`,
		PersistentPreRunE: func(cmd *cobra.Command, args []string) error {
			return applyEnv(cmd.Flags())
		},
	}
	f := cmd.PersistentFlags()
	f.StringVar(&o.server, "server", "http://127.0.0.1:8080", "URL of the hoist server")
	f.StringVar(&o.token, "token", "", "API token (default HOIST_TOKEN, HOIST_ADMIN_TOKEN or <data-dir>/admin-token)")
	f.StringVar(&o.dataDir, "data-dir", defaultDataDir(), "where to find the admin token")

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
			body, err := json.Marshal(map[string]string{"value": string(value)})
			if err != nil {
				return err
			}
			if err := o.call(cmd, http.MethodPut, args[0], body, nil); err != nil {
				return err
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
			var v struct {
				Value string `json:"value"`
			}
			if err := o.call(cmd, http.MethodGet, args[0], nil, &v); err != nil {
				return err
			}
			_, err := io.WriteString(cmd.OutOrStdout(), v.Value)
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
			var list []web.Secret
			if err := o.call(cmd, http.MethodGet, "", nil, &list); err != nil {
				return err
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
			if err := o.call(cmd, http.MethodDelete, args[0], nil, nil); err != nil {
				return err
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

// call sends one request to /api/v1/secrets[/name] and decodes the answer
// into out (when not nil). Errors carry the server's message, never a value.
func (o secretClientOptions) call(cmd *cobra.Command, method, name string, body []byte, out any) error {
	token := o.token
	if token == "" {
		token = os.Getenv("HOIST_TOKEN")
	}
	if token == "" {
		var err error
		if token, err = adminTokenIfAny(o.dataDir); err != nil {
			return err
		}
	}
	u := strings.TrimRight(o.server, "/") + "/api/v1/secrets"
	if name != "" {
		u += "/" + url.PathEscape(name)
	}
	var rb io.Reader
	if body != nil {
		rb = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(cmd.Context(), method, u, rb)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := (&http.Client{Timeout: time.Minute}).Do(req)
	if err != nil {
		return fmt.Errorf("secret: %w", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		var e struct {
			Message string `json:"message"`
		}
		_ = json.Unmarshal(b, &e)
		if e.Message == "" {
			e.Message = resp.Status
		}
		return fmt.Errorf("secret: server answered %s: %s", resp.Status, e.Message)
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(b, out); err != nil {
		return fmt.Errorf("secret: decode the answer: %w", err)
	}
	return nil
}
