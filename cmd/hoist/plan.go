package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"hoist/schema"
	"hoist/web"
)

type planOptions struct {
	clientOptions
	output   string
	detailed bool
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

` + clientHelp,
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
	o.addProjectFlags(f)
	f.StringVarP(&o.output, "output", "o", "table", "output format: table or json")
	f.BoolVar(&o.detailed, "detailed-exitcode", false, "exit 2 when the plan has changes")
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
	body := web.PlanRequest{Files: map[string]string{}}
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
		body.Files[filepath.ToSlash(rel)] = string(b)
	}
	if len(body.Files) == 0 {
		return errors.New("no spec files under the given paths")
	}
	if err := addProviderFiles(body.Files, base); err != nil {
		return err
	}
	c, err := o.client()
	if err != nil {
		return err
	}
	p, err := c.Plan(cmd.Context(), body)
	if err != nil {
		return fmt.Errorf("plan: %w", err)
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
		for _, j := range c.Jobs {
			fmt.Fprintf(tw, "\t\t  job %s\t%s\n", j.Name, j.Summary())
		}
	}
	tw.Flush()
	fmt.Fprintf(w, "\nPlan: %d to create, %d to update, %d to replace, %d to delete, %d unchanged.\n",
		counts["create"], counts["update"], counts["replace"], counts["delete"], counts["none"])
	fmt.Fprintf(w, "Estimated spend: $%.2f/h now, $%.2f/h after.\n", p.CostBefore, p.CostAfter)
	if b := p.Budget; b != nil {
		fmt.Fprintf(w, "Budget of project %s: %s; spent $%.2f this month.\n", b.Project, budgetLimits(b.Budget), b.MonthToDate)
	}
	if p.Held {
		for _, r := range p.HeldReasons {
			fmt.Fprintln(w, "Held: "+r+".")
		}
		fmt.Fprintln(w, "Held: applying this revision waits for confirmation (POST /api/v1/sync/confirm).")
	}
}

// maxPlanFileBytes is what `hoist plan` sends at most: the server's limit
// on a plan's body (web's plan route), less room for its JSON.
const maxPlanFileBytes = 7 << 20

// addProviderFiles adds to files (path relative to base → content) the
// files the providers under base read besides the spec files
// (schema.ProviderFiles): schema files and inputs, or, for a program
// provider without inputs, every file Git tracks there (what its input
// hash covers on the server), so that the plan says what the sync will.
func addProviderFiles(files map[string]string, base string) error {
	paths, all := schema.ProviderFiles(os.DirFS(base))
	if all {
		tracked, err := trackedFiles(base)
		if err != nil {
			return err
		}
		paths = append(paths, tracked...)
	}
	total := 0
	for _, c := range files {
		total += len(c)
	}
	for _, p := range paths {
		err := fs.WalkDir(os.DirFS(base), p, func(f string, d fs.DirEntry, err error) error {
			if err != nil {
				if errors.Is(err, fs.ErrNotExist) {
					return nil // the server says what is missing
				}
				return err
			}
			if d.IsDir() {
				if d.Name() == ".git" {
					return fs.SkipDir
				}
				return nil
			}
			if _, ok := files[f]; ok || !d.Type().IsRegular() {
				return nil
			}
			b, err := os.ReadFile(filepath.Join(base, filepath.FromSlash(f)))
			if err != nil {
				return err
			}
			if total += len(b); total > maxPlanFileBytes {
				return fmt.Errorf("the files the providers of %s read come to more than %d MiB, more than a plan sends: name a program provider's `inputs`",
					schema.ProvidersFile, maxPlanFileBytes>>20)
			}
			files[f] = string(b)
			return nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// trackedFiles lists the files Git tracks under dir (slash paths relative
// to it), or every file there outside a Git work tree.
func trackedFiles(dir string) ([]string, error) {
	cmd := exec.Command("git", "-C", dir, "ls-files", "-z", "--", ".")
	out, err := cmd.Output()
	if err != nil {
		return []string{"."}, nil // not a work tree: every file
	}
	var paths []string
	for _, p := range strings.Split(string(out), "\x00") {
		if p != "" {
			paths = append(paths, p)
		}
	}
	return paths, nil
}
