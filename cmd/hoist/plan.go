package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"hoist/web"
)

type planOptions struct {
	server, token, output, dataDir string
	detailed                       bool
}

func newPlanCmd() *cobra.Command {
	var o planOptions
	cmd := &cobra.Command{
		Use:   "plan [PATH...]",
		Short: "Show what applying local specs would change on a running hoist server",
		Long: `Plan the specs under PATH (files and directories; default ".") as the whole
desired state against a running hoist server's state, and print the plan:
per resource create, update (in place), replace, delete or no change, with
the reason and the changed fields. Nothing is applied.

Exit codes: 0 when the plan was computed (with --detailed-exitcode: and there
are no changes), 1 on invalid specs or errors, 2 with --detailed-exitcode when
there are changes — what CI runs on a pull request.

The server is --server (HOIST_SERVER, default http://127.0.0.1:8080); the
token is --token (HOIST_TOKEN, then HOIST_ADMIN_TOKEN, then the admin token in
--data-dir).`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := applyEnv(cmd.Flags()); err != nil {
				return err
			}
			if len(args) == 0 {
				args = []string{"."}
			}
			return runPlan(cmd, o, args)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.server, "server", "http://127.0.0.1:8080", "URL of the hoist server")
	f.StringVar(&o.token, "token", "", "API token (default HOIST_ADMIN_TOKEN or <data-dir>/admin-token)")
	f.StringVarP(&o.output, "output", "o", "table", "output format: table or json")
	f.BoolVar(&o.detailed, "detailed-exitcode", false, "exit 2 when the plan has changes")
	f.StringVar(&o.dataDir, "data-dir", defaultDataDir(), "where to find the admin token")
	return cmd
}

func runPlan(cmd *cobra.Command, o planOptions, args []string) error {
	if o.output != "table" && o.output != "json" {
		return fmt.Errorf("invalid --output %q: must be table or json", o.output)
	}
	files, err := specFiles(args)
	if err != nil {
		return err
	}
	// Validate locally first, as the server does (the schema, then what
	// hoist supports): errors name the files as the user typed them.
	_, errs, warns, err := loadSupported(files, nil)
	if err != nil {
		return err
	}
	if len(errs) > 0 {
		printFindings(cmd.ErrOrStderr(), errs, warns)
		return &exitError{1}
	}
	// Warnings come from the server's answer (it applies the same
	// advisories), so they are printed once.
	body := map[string]map[string]string{"files": {}}
	base := planBase(args)
	for _, f := range files {
		b, err := os.ReadFile(filepath.FromSlash(f))
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(base, filepath.FromSlash(f))
		if err != nil || strings.HasPrefix(rel, "..") {
			rel = f
		}
		body["files"][filepath.ToSlash(rel)] = string(b)
	}
	if len(body["files"]) == 0 {
		return errors.New("no spec files under the given paths")
	}
	token := o.token
	if token == "" {
		token = os.Getenv("HOIST_TOKEN")
	}
	if token == "" {
		if token, err = adminTokenIfAny(o.dataDir); err != nil {
			return err
		}
	}
	p, err := postPlan(cmd, o.server, token, body)
	if err != nil {
		return err
	}
	if o.output == "json" {
		enc := json.NewEncoder(cmd.OutOrStdout())
		enc.SetIndent("", "  ")
		if err := enc.Encode(p); err != nil {
			return err
		}
	} else {
		printPlan(cmd.OutOrStdout(), p)
	}
	if !p.Valid {
		return &exitError{1}
	}
	if o.detailed && planChanges(p) {
		return &exitError{2}
	}
	return nil
}

// planBase is the directory file names are sent relative to: the one
// directory given, or the working directory.
func planBase(args []string) string {
	if len(args) == 1 {
		if st, err := os.Stat(args[0]); err == nil && st.IsDir() {
			return args[0]
		}
	}
	return "."
}

func adminTokenIfAny(dataDir string) (string, error) {
	if t := os.Getenv("HOIST_ADMIN_TOKEN"); t != "" {
		return t, nil
	}
	b, err := os.ReadFile(filepath.Join(dataDir, "admin-token"))
	if errors.Is(err, os.ErrNotExist) {
		return "", errors.New("no API token: give --token or HOIST_TOKEN")
	}
	return strings.TrimSpace(string(b)), err
}

func postPlan(cmd *cobra.Command, server, token string, body any) (web.Plan, error) {
	var p web.Plan
	b, err := json.Marshal(body)
	if err != nil {
		return p, err
	}
	req, err := http.NewRequestWithContext(cmd.Context(), http.MethodPost, strings.TrimRight(server, "/")+"/api/v1/plan", bytes.NewReader(b))
	if err != nil {
		return p, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := (&http.Client{Timeout: time.Minute}).Do(req)
	if err != nil {
		return p, fmt.Errorf("plan: %w", err)
	}
	defer resp.Body.Close()
	rb, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return p, err
	}
	if resp.StatusCode != http.StatusOK {
		var e struct {
			Message string `json:"message"`
		}
		_ = json.Unmarshal(rb, &e)
		if e.Message == "" {
			e.Message = strings.TrimSpace(string(rb))
		}
		return p, fmt.Errorf("plan: server answered %s: %s", resp.Status, e.Message)
	}
	if err := json.Unmarshal(rb, &p); err != nil {
		return p, fmt.Errorf("plan: %w", err)
	}
	return p, nil
}

func planChanges(p web.Plan) bool {
	for _, c := range p.Changes {
		if c.Action != "none" {
			return true
		}
	}
	return false
}

// warningLine marks a server's "path:line:col: message" warning the way
// printFindings does: "path:line:col: warning: message".
func warningLine(e string) string {
	// The position is the first three colon-separated fields.
	if parts := strings.SplitN(e, ": ", 2); len(parts) == 2 {
		return parts[0] + ": warning: " + parts[1]
	}
	return "warning: " + e
}

func printPlan(w io.Writer, p web.Plan) {
	for _, e := range p.Errors {
		fmt.Fprintln(w, e)
	}
	for _, e := range p.Warnings {
		fmt.Fprintln(w, warningLine(e))
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ACTION\tKIND\tNAME\tDETAIL")
	counts := map[string]int{}
	for _, c := range p.Changes {
		counts[c.Action]++
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", c.Action, c.Kind, c.Name, c.Detail)
	}
	tw.Flush()
	fmt.Fprintf(w, "\nPlan: %d to create, %d to update, %d to replace, %d to delete, %d unchanged.\n",
		counts["create"], counts["update"], counts["replace"], counts["delete"], counts["none"])
	fmt.Fprintf(w, "Estimated spend: $%.2f/h now, $%.2f/h after.\n", p.CostBefore, p.CostAfter)
	if p.Held {
		fmt.Fprintln(w, "Held: applying this revision waits for confirmation (POST /api/v1/sync/confirm).")
	}
}
