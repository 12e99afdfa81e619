package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"hoist/web"
	"hoist/web/client"
)

func newArtifactsCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "artifacts",
		Short: "List and download the files runs' jobs left behind (their spec's artifacts)",
		Args:  cobra.NoArgs,
	}
	cmd.AddCommand(newArtifactsListCmd(), newArtifactsGetCmd())
	return cmd
}

// jobFlag registers --job N on cmd and returns the chosen job number, -1
// when the flag was not given.
func jobFlag(cmd *cobra.Command) func() (int, error) {
	var job int
	cmd.Flags().IntVar(&job, "job", 0, "only the artifacts of this job number (a workflow job's job_num, as hoist artifacts list and the API show it)")
	return func() (int, error) {
		if !cmd.Flags().Changed("job") {
			return -1, nil
		}
		if job < 0 {
			return 0, fmt.Errorf("invalid --job %d: a job number is 0 or more", job)
		}
		return job, nil
	}
}

func newArtifactsListCmd() *cobra.Command {
	var o clientOptions
	var output string
	cmd := &cobra.Command{
		Use:   "list RUN",
		Short: "List a run's artifact files: job, path, size and when they were stored",
		Long: `List the artifact files RUN's jobs left behind, by job number and path
(--job N: job N's only).

` + clientHelp + "\n\n" + exitHelp,
		Args: cobra.ExactArgs(1),
	}
	check := outputFlag(cmd, &output)
	job := jobFlag(cmd)
	o.addProjectFlags(cmd.Flags())
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		c, err := o.connect(cmd, check)
		if err != nil {
			return err
		}
		n, err := job()
		if err != nil {
			return err
		}
		arts, err := c.Artifacts(cmd.Context(), args[0], n)
		if err != nil {
			return fmt.Errorf("artifacts: %w", err)
		}
		w := cmd.OutOrStdout()
		if output == "json" {
			if arts == nil {
				arts = []web.Artifact{}
			}
			return writeJSON(w, arts)
		}
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "JOB\tPATH\tSIZE\tSTORED")
		for _, a := range arts {
			fmt.Fprintf(tw, "%d\t%s\t%d\t%s\n", a.JobNum, a.Path, a.Size, a.ModifiedAt.UTC().Format(timeLayout))
		}
		return tw.Flush()
	}
	return cmd
}

func newArtifactsGetCmd() *cobra.Command {
	var o clientOptions
	var dir string
	cmd := &cobra.Command{
		Use:   "get RUN [PATH]",
		Short: "Download a run's artifact files into a directory, keeping their paths",
		Long: `Download the artifact files of RUN's jobs (--job N: job N's only; PATH: only
that file, or the files under that folder) and write each at DIR/<its path>,
its path being relative to the job's working directory. Files are written
whole or not at all (a temporary file renamed into place), replacing files
of the same name, and never outside DIR. Without --job, two jobs' files of
the same path are an error: pick one job with --job.

` + clientHelp + "\n\n" + exitHelp,
		Args: cobra.RangeArgs(1, 2),
	}
	job := jobFlag(cmd)
	cmd.Flags().StringVarP(&dir, "output", "o", ".", "directory to write the files into (created if needed)")
	o.addProjectFlags(cmd.Flags())
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		c, err := o.connect(cmd)
		if err != nil {
			return err
		}
		n, err := job()
		if err != nil {
			return err
		}
		var prefix string
		if len(args) == 2 {
			if prefix, err = artifactPrefix(args[1]); err != nil {
				return err
			}
		}
		arts, err := c.Artifacts(cmd.Context(), args[0], n)
		if err != nil {
			return fmt.Errorf("artifacts: %w", err)
		}
		arts, err = pickArtifacts(args[0], arts, prefix)
		if err != nil {
			return err
		}
		if err := os.MkdirAll(dir, 0o777); err != nil {
			return fmt.Errorf("artifacts: %w", err)
		}
		root, err := os.OpenRoot(dir)
		if err != nil {
			return fmt.Errorf("artifacts: %w", err)
		}
		defer root.Close()
		var total int64
		for _, a := range arts {
			size, err := downloadArtifact(cmd.Context(), c, root, args[0], a)
			if err != nil {
				return fmt.Errorf("artifacts: job %d %s: %w", a.JobNum, a.Path, err)
			}
			total += size
		}
		fmt.Fprintf(cmd.ErrOrStderr(), "%d files (%d bytes) written to %s\n", len(arts), total, dir)
		return nil
	}
	return cmd
}

// artifactPrefix cleans the PATH argument: a relative slash path ("./"
// and a trailing slash dropped), refused when it leaves the working
// directory.
func artifactPrefix(arg string) (string, error) {
	p := strings.TrimSuffix(path.Clean(strings.TrimPrefix(arg, "./")), "/")
	if !web.ValidArtifactPath(p) {
		return "", fmt.Errorf("invalid PATH %q: give a path relative to the job's working directory, without ..", arg)
	}
	return p, nil
}

// pickArtifacts keeps the files at or under prefix (all when it is ""),
// checking that every path is safe to write and that no two jobs' files
// share one.
func pickArtifacts(run string, arts []web.Artifact, prefix string) ([]web.Artifact, error) {
	var out []web.Artifact
	byPath := map[string]int{}
	for _, a := range arts {
		if prefix != "" && a.Path != prefix && !strings.HasPrefix(a.Path, prefix+"/") {
			continue
		}
		if !web.ValidArtifactPath(a.Path) {
			return nil, fmt.Errorf("artifacts: the server listed an unsafe path %q", a.Path)
		}
		if other, dup := byPath[a.Path]; dup {
			return nil, fmt.Errorf("artifacts: jobs %d and %d both have %s: pick one with --job", other, a.JobNum, a.Path)
		}
		byPath[a.Path] = a.JobNum
		out = append(out, a)
	}
	if len(out) == 0 {
		if prefix != "" {
			return nil, fmt.Errorf("artifacts: run %s has no artifact at %s", run, prefix)
		}
		return nil, fmt.Errorf("artifacts: run %s has no artifacts", run)
	}
	return out, nil
}

// downloadArtifact writes one file at its path below root: into a
// temporary file beside it, renamed into place once complete. root keeps
// every name (symbolic links included) inside the directory.
func downloadArtifact(ctx context.Context, c *client.Client, root *os.Root, run string, a web.Artifact) (int64, error) {
	body, size, err := c.Artifact(ctx, run, a.JobNum, a.Path)
	if err != nil {
		return 0, err
	}
	defer body.Close()
	name := a.Path
	if d := path.Dir(name); d != "." {
		if err := root.MkdirAll(d, 0o777); err != nil {
			return 0, err
		}
	}
	var rnd [6]byte
	_, _ = rand.Read(rnd[:])
	tmp := path.Join(path.Dir(name), "."+path.Base(name)+".hoist-"+hex.EncodeToString(rnd[:]))
	f, err := root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o666)
	if err != nil {
		return 0, err
	}
	done := false
	defer func() {
		if !done {
			_ = f.Close()
			_ = root.Remove(tmp)
		}
	}()
	n, err := io.Copy(f, body)
	if err != nil {
		return 0, err
	}
	if size >= 0 && n != size {
		return 0, fmt.Errorf("the download ended after %d of %d bytes", n, size)
	}
	if err := f.Close(); err != nil {
		return 0, err
	}
	if err := root.Rename(tmp, name); err != nil {
		return 0, err
	}
	done = true
	return n, nil
}
