package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"hoist/reconciler/policy"
	"hoist/reconciler/support"
	"hoist/schema"
)

// osFS opens paths exactly as given (relative to the working directory or
// absolute), so errors name files the way the user typed them.
type osFS struct{}

func (osFS) Open(name string) (fs.File, error) { return os.Open(filepath.FromSlash(name)) }

func newValidateCmd() *cobra.Command {
	var output, config string
	cmd := &cobra.Command{
		Use:   "validate PATH...",
		Short: "Validate dstack-style specs (files and directories) as one desired state",
		Long: "Validate every *.dstack.yml, *.dstack.yaml, .dstack.yml and *.cue file under the given\n" +
			"paths as one desired-state set: against the schema (dstack's language), then against\n" +
			"what hoist's runtime supports (`hoist schema --support`), exactly as `hoist serve`\n" +
			"checks a revision. Exits 0 when valid and 1 when not; every error is printed to\n" +
			"stderr as path:line:col: message, and every warning (a field without effect in\n" +
			"hoist) as path:line:col: warning: message.",
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if output != "text" && output != "json" {
				return fmt.Errorf("invalid --output %q: must be text or json", output)
			}
			files, err := specFiles(args)
			if err != nil {
				return err
			}
			var pol *policy.Policy
			if config != "" {
				// The server's policy as `hoist serve --config` applies it,
				// with the data directory serve would use.
				cfg, err := loadServerConfig(config)
				if err != nil {
					return err
				}
				dataDir := os.Getenv("HOIST_DATA_DIR")
				if dataDir == "" {
					dataDir = defaultDataDir()
				}
				if pol, err = buildPolicy(cfg, dataDir, os.Getenv("HOIST_AGENTS_DIR")); err != nil {
					return fmt.Errorf("config %s: %w", config, err)
				}
			}
			desired, errs, warns, err := loadSupported(files, pol)
			if err != nil {
				return err
			}
			if output == "json" {
				if err := writeValidateJSON(cmd, desired, errs, warns); err != nil {
					return err
				}
			} else {
				printFindings(cmd.ErrOrStderr(), errs, warns)
				if len(errs) == 0 {
					fmt.Fprintf(cmd.OutOrStdout(), "%d resources valid\n", len(desired.Resources))
				}
			}
			if len(errs) > 0 {
				return &exitError{1}
			}
			return nil
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "text", "output format: text or json")
	cmd.Flags().StringVar(&config, "config", "", "server config file whose policy (what specs may ask of a host) is applied too, as `hoist serve --config` does")
	return cmd
}

// loadSupported loads the spec files like `hoist serve` loads a revision:
// the schema first, then what hoist's runtime supports and, when pol is not
// nil, the server's policy. errs rejects the set; warns name fields that
// have no effect; err is an I/O failure.
func loadSupported(files []string, pol *policy.Policy) (desired *schema.Desired, errs, warns schema.Errors, err error) {
	desired, err = schema.LoadFiles(osFS{}, files)
	if err != nil {
		if !errors.As(err, &errs) {
			return nil, nil, nil, err
		}
		return nil, errs, nil, nil
	}
	warns = support.WarningsAll(desired)
	errs = support.CheckAll(desired)
	for i := range desired.Resources {
		errs = append(errs, codePathsInWorkTree(&desired.Resources[i])...)
	}
	errs.Sort()
	if pol != nil {
		for i := range desired.Resources {
			errs = append(errs, pol.Check(&desired.Resources[i])...)
		}
		errs.Sort()
	}
	if len(errs) > 0 {
		return nil, errs, warns, nil
	}
	return desired, nil, warns, nil
}

// printFindings writes errors, then warnings, one per line.
func printFindings(w io.Writer, errs, warns schema.Errors) {
	for _, e := range errs {
		fmt.Fprintln(w, e.Error())
	}
	for _, e := range warns {
		fmt.Fprintf(w, "%s: warning: %s\n", e.Pos, e.Msg)
	}
}

// specFiles expands directories into the spec files under them; files given
// explicitly are validated whatever their name.
func specFiles(args []string) ([]string, error) {
	var files []string
	for _, a := range args {
		st, err := os.Stat(a)
		if err != nil {
			return nil, err
		}
		if !st.IsDir() {
			files = append(files, filepath.ToSlash(a))
			continue
		}
		err = filepath.WalkDir(a, func(p string, de fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if de.IsDir() {
				if p != a && (de.Name() == ".git" || de.Name() == "cue.mod") {
					return filepath.SkipDir
				}
				return nil
			}
			if de.Type().IsRegular() && schema.IsSpecFile(p) {
				files = append(files, filepath.ToSlash(p))
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	return files, nil
}

type jsonError struct {
	File    string `json:"file"`
	Line    int    `json:"line"`
	Column  int    `json:"column"`
	Path    string `json:"path,omitempty"`
	Message string `json:"message"`
}

type jsonResource struct {
	Kind string          `json:"kind"`
	Name string          `json:"name"`
	File string          `json:"file"`
	Spec json.RawMessage `json:"spec"`
}

func writeValidateJSON(cmd *cobra.Command, desired *schema.Desired, errs, warns schema.Errors) error {
	out := struct {
		Valid     bool           `json:"valid"`
		Errors    []jsonError    `json:"errors"`
		Warnings  []jsonError    `json:"warnings"`
		Resources []jsonResource `json:"resources"`
	}{Valid: len(errs) == 0, Errors: jsonErrors(errs), Warnings: jsonErrors(warns), Resources: []jsonResource{}}
	if desired != nil {
		for _, r := range desired.Resources {
			out.Resources = append(out.Resources, jsonResource{Kind: string(r.Kind), Name: r.Name, File: r.File, Spec: r.JSON})
		}
	}
	enc := json.NewEncoder(cmd.OutOrStdout())
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}

func jsonErrors(es schema.Errors) []jsonError {
	out := []jsonError{}
	for _, e := range es {
		out = append(out, jsonError{File: e.Pos.File, Line: e.Pos.Line, Column: e.Pos.Column, Path: e.Path, Message: e.Msg})
	}
	return out
}

// codePathsInWorkTree applies support.CodePathsAt to a spec file that lies in
// a Git work tree, whose root is the spec repository; a file outside any
// work tree has no repository to judge its local paths against.
func codePathsInWorkTree(r *schema.Resource) schema.Errors {
	abs, err := filepath.Abs(filepath.FromSlash(r.Pos.File))
	if err != nil {
		return nil
	}
	for dir := filepath.Dir(abs); ; dir = filepath.Dir(dir) {
		if _, err := os.Lstat(filepath.Join(dir, ".git")); err == nil {
			rel, err := filepath.Rel(dir, abs)
			if err != nil {
				return nil
			}
			return support.CodePathsAt(r, filepath.ToSlash(rel))
		}
		if dir == filepath.Dir(dir) {
			return nil
		}
	}
}
