package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"hoist/web"
	"hoist/web/client"
)

// timeLayout is how the run commands print times: UTC, to the second.
const timeLayout = "2006-01-02 15:04:05"

// watchEvery is how often `ps -w` redraws and `events -f` polls.
const watchEvery = 2 * time.Second

// finishedRun reports whether a run status is terminal (dstack's
// RunStatus.is_finished: terminated, failed, done).
func finishedRun(status string) bool {
	switch status {
	case "terminated", "failed", "done":
		return true
	}
	return false
}

func newPsCmd() *cobra.Command {
	var o clientOptions
	var output string
	var all, watch bool
	cmd := &cobra.Command{
		Use:   "ps",
		Short: "List runs: name, type, status, fleet, cost and when they were submitted",
		Long: `List the server's runs, most recently submitted first. As dstack's ps,
without -a it shows the runs that have not finished, or the last finished one
when all have; -a shows all. -w redraws the list every 2 seconds until
interrupted (with -o json: one JSON array per line at each redraw).

` + clientHelp + "\n\n" + exitHelp,
		Args: cobra.NoArgs,
	}
	check := outputFlag(cmd, &output)
	o.addProjectFlags(cmd.Flags())
	cmd.Flags().BoolVarP(&all, "all", "a", false, "show finished runs too")
	cmd.Flags().BoolVarP(&watch, "watch", "w", false, "redraw every 2 seconds until interrupted")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		c, err := o.connect(cmd, check)
		if err != nil {
			return err
		}
		w := cmd.OutOrStdout()
		show := func() error {
			runs, err := c.Runs(cmd.Context(), client.RunsQuery{})
			if err != nil {
				return err
			}
			runs = psRuns(runs, all)
			if output == "json" {
				if watch {
					return json.NewEncoder(w).Encode(runs)
				}
				return writeJSON(w, runs)
			}
			if watch {
				fmt.Fprint(w, "\x1b[H\x1b[2J") // cursor home, clear screen
			}
			return printRuns(w, runs)
		}
		if !watch {
			return show()
		}
		t := time.NewTicker(watchEvery)
		defer t.Stop()
		for {
			if err := show(); err != nil {
				if cmd.Context().Err() != nil {
					return nil
				}
				return err
			}
			select {
			case <-cmd.Context().Done():
				return nil // interrupted: watching ends normally
			case <-t.C:
			}
		}
	}
	return cmd
}

// psRuns is what ps shows: all runs with all, else the unfinished ones, or
// the newest finished one when every run finished.
func psRuns(runs []web.Run, all bool) []web.Run {
	out := []web.Run{}
	if all {
		return append(out, runs...)
	}
	for _, r := range runs {
		if !finishedRun(r.Status) {
			out = append(out, r)
		}
	}
	if len(out) == 0 && len(runs) > 0 {
		out = append(out, runs[0])
	}
	return out
}

func printRuns(w io.Writer, runs []web.Run) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tTYPE\tSTATUS\tFLEET\tCOST/H\tSUBMITTED")
	for _, r := range runs {
		status := r.Status
		if r.Suspended {
			status += " (suspended)"
		}
		fleet := r.Fleet
		if fleet == "" {
			fleet = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t$%.2f\t%s\n", r.Name, r.Type, status, fleet, r.CostPerHour, r.SubmittedAt.UTC().Format(timeLayout))
	}
	return tw.Flush()
}

// parseSince reads --since: a duration back from now (10m, 2h) or an RFC
// 3339 time.
func parseSince(v string, now time.Time) (time.Time, error) {
	if v == "" {
		return time.Time{}, nil
	}
	if d, err := time.ParseDuration(v); err == nil {
		if d < 0 {
			return time.Time{}, fmt.Errorf("invalid --since %q: must not be negative", v)
		}
		return now.Add(-d), nil
	}
	t, err := time.Parse(time.RFC3339, v)
	if err != nil {
		return time.Time{}, fmt.Errorf("invalid --since %q: give a duration (10m, 2h) or an RFC 3339 time", v)
	}
	return t, nil
}

func newLogsCmd() *cobra.Command {
	var o clientOptions
	var output, since, job string
	var follow bool
	cmd := &cobra.Command{
		Use:   "logs RUN",
		Short: "Print a run's output; -f follows it until the job ends",
		Long: `Print the output of RUN's newest job (--job picks another submission: its
id or number). -f keeps printing new lines until the job ends, then exits 0
(1 when the stream ended otherwise: the server closed it, or the run has no
job yet);
--since keeps lines written in the last duration (10m, 2h) or after an RFC
3339 time. With -o json each line is a JSON object {"run", "text"} on a line
of its own (JSON Lines).

` + clientHelp + "\n\n" + exitHelp,
		Args: cobra.ExactArgs(1),
	}
	check := outputFlag(cmd, &output)
	o.addProjectFlags(cmd.Flags())
	cmd.Flags().BoolVarP(&follow, "follow", "f", false, "follow the output until the job ends")
	cmd.Flags().StringVar(&since, "since", "", "only lines newer than this duration (10m) or RFC 3339 time")
	cmd.Flags().StringVar(&job, "job", "", "the submission (id or number; default the newest)")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		if err := o.prepare(cmd, check); err != nil {
			return err
		}
		t, err := parseSince(since, time.Now())
		if err != nil {
			return err
		}
		c, err := o.client()
		if err != nil {
			return err
		}
		var w io.Writer = cmd.OutOrStdout()
		var jw *jsonLines
		if output == "json" {
			jw = &jsonLines{run: args[0], enc: json.NewEncoder(w)}
			w = jw
		}
		err = c.Logs(cmd.Context(), args[0], client.LogsQuery{Job: job, Since: t, Follow: follow}, w)
		if errors.Is(err, context.Canceled) && follow {
			return nil // interrupted while following
		}
		if err != nil {
			return fmt.Errorf("logs: %w", err)
		}
		if jw != nil {
			if err := jw.flush(); err != nil {
				return err
			}
		}
		if follow {
			return followEnded(cmd.Context(), c, args[0], job)
		}
		return nil
	}
	return cmd
}

// followEnded checks, once a followed log stream ended, that it ended
// because the job finished: a stream the server closed early (it shut down,
// or the run has no job yet) is an error, so that exit 0 means the job ended.
func followEnded(ctx context.Context, c *client.Client, name, job string) error {
	run, err := c.Run(ctx, name)
	if err != nil {
		return fmt.Errorf("logs: %w", err)
	}
	for i, j := range run.Jobs {
		if job == "" && i > 0 {
			break
		}
		if job == "" || j.ID == job || j.SubmissionID == job || strconv.Itoa(j.SubmissionNum) == job {
			if !finishedJob(j.Status) {
				return fmt.Errorf("logs: the server ended the stream while job %s is %s", j.JobName, j.Status)
			}
			return nil
		}
	}
	if job != "" {
		return fmt.Errorf("logs: run %s has no job %s", name, job)
	}
	if !finishedRun(run.Status) {
		return fmt.Errorf("logs: run %s is %s and has no job yet", name, run.Status)
	}
	return nil
}

// finishedJob reports whether a job status is terminal (dstack's
// JobStatus.finished_statuses).
func finishedJob(status string) bool {
	switch status {
	case "terminated", "aborted", "failed", "done":
		return true
	}
	return false
}

// logLine is one line of `hoist logs -o json`.
type logLine struct {
	Run  string `json:"run"`
	Text string `json:"text"`
}

// jsonLines turns the text the logs API streams into one JSON object per
// line.
type jsonLines struct {
	run     string
	enc     *json.Encoder
	partial []byte
}

func (j *jsonLines) Write(p []byte) (int, error) {
	n := len(p)
	for {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			j.partial = append(j.partial, p...)
			return n, nil
		}
		line := append(j.partial, p[:i]...)
		j.partial = nil
		if err := j.enc.Encode(logLine{Run: j.run, Text: string(line)}); err != nil {
			return 0, err
		}
		p = p[i+1:]
	}
}

// flush writes a last line that had no newline.
func (j *jsonLines) flush() error {
	if len(j.partial) == 0 {
		return nil
	}
	err := j.enc.Encode(logLine{Run: j.run, Text: string(j.partial)})
	j.partial = nil
	return err
}

func newStopCmd() *cobra.Command {
	var o clientOptions
	var output string
	var abort bool
	cmd := &cobra.Command{
		Use:   "stop RUN",
		Short: "Stop a run; it stays stopped until its spec changes or it is re-run",
		Long: `Ask the server to stop RUN. The stop is graceful, as dstack's stop: each
job gets SIGTERM and its stop grace (stop_duration, at most 10 s in hoist)
before SIGKILL, and the run ends terminated (stopped_by_user). With -x/--abort
the jobs are killed at once, without the grace, and the run ends terminated
with reason aborted_by_user, its jobs aborted (dstack's stop --abort). An
abort also hurries a run already stopping; jobs already in their grace keep it.

` + clientHelp + "\n\n" + exitHelp,
		Args: cobra.ExactArgs(1),
	}
	check := outputFlag(cmd, &output)
	o.addProjectFlags(cmd.Flags())
	cmd.Flags().BoolVarP(&abort, "abort", "x", false, "kill the jobs at once, without their graceful stop")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		c, err := o.connect(cmd, check)
		if err != nil {
			return err
		}
		done, err := c.Stop(cmd.Context(), args[0], abort)
		if err != nil {
			return fmt.Errorf("stop %s: %w", args[0], err)
		}
		if output == "json" {
			return writeJSON(cmd.OutOrStdout(), done)
		}
		_, err = fmt.Fprintf(cmd.OutOrStdout(), "%s: %s\n", args[0], done.Message)
		return err
	}
	return cmd
}

func newEventsCmd() *cobra.Command {
	var o clientOptions
	var output, run, kind string
	var follow bool
	var limit int
	cmd := &cobra.Command{
		Use:   "events",
		Short: "Print the audit trail: what the reconciler did and why, oldest first",
		Long: `Print the server's events, oldest first: of one run with --run, of one kind
of object with --kind (run, fleet, sync, …). -f keeps polling every 2 seconds
and prints new events until interrupted. With -o json the events are a JSON
array, or with -f one JSON object per line (JSON Lines).

` + clientHelp + "\n\n" + exitHelp,
		Args: cobra.NoArgs,
	}
	check := outputFlag(cmd, &output)
	o.addProjectFlags(cmd.Flags())
	cmd.Flags().StringVar(&run, "run", "", "only events of this run")
	cmd.Flags().StringVar(&kind, "kind", "", "only events of this kind of object (run, fleet, sync, …)")
	cmd.Flags().BoolVarP(&follow, "follow", "f", false, "keep printing new events until interrupted")
	cmd.Flags().IntVar(&limit, "limit", 0, "at most this many of the newest events (default the server's, 200)")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		if err := o.prepare(cmd, check); err != nil {
			return err
		}
		q := client.EventsQuery{Kind: kind, Name: run, Limit: limit}
		if run != "" {
			if kind != "" && kind != "run" {
				return fmt.Errorf("--run and --kind %s: a run's events are of kind run", kind)
			}
			q.Kind = "run"
		}
		c, err := o.client()
		if err != nil {
			return err
		}
		if run != "" {
			// A run that does not exist is an error (exit 3), not an
			// empty trail.
			if _, err := c.Run(cmd.Context(), run); err != nil {
				return fmt.Errorf("events: %w", err)
			}
		}
		w := cmd.OutOrStdout()
		if !follow {
			evs, err := c.Events(cmd.Context(), q)
			if err != nil {
				return fmt.Errorf("events: %w", err)
			}
			oldest := make([]web.Event, 0, len(evs))
			for i := len(evs) - 1; i >= 0; i-- {
				oldest = append(oldest, evs[i])
			}
			if output == "json" {
				return writeJSON(w, oldest)
			}
			tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, eventHeader)
			for _, e := range oldest {
				fmt.Fprintln(tw, eventRow(e))
			}
			return tw.Flush()
		}
		enc := json.NewEncoder(w)
		if output == "table" {
			fmt.Fprintf(w, followedEventFormat, "TIME", "KIND", "NAME", "TYPE", "MESSAGE")
		}
		err = c.FollowEvents(cmd.Context(), q, watchEvery, func(e web.Event) error {
			if output == "json" {
				return enc.Encode(e)
			}
			_, err := fmt.Fprintf(w, followedEventFormat, e.Time.UTC().Format(timeLayout), e.Kind, e.Name, e.Type, e.Message)
			return err
		})
		if errors.Is(err, context.Canceled) {
			return nil // interrupted: following ends normally
		}
		if err != nil {
			return fmt.Errorf("events: %w", err)
		}
		return nil
	}
	return cmd
}

const eventHeader = "TIME\tKIND\tNAME\tTYPE\tMESSAGE"

// followedEventFormat lays out `events -f` rows in fixed columns: they are
// printed as they come, so no table can measure them first.
const followedEventFormat = "%-19s  %-8s  %-16s  %-12s  %s\n"

func eventRow(e web.Event) string {
	return fmt.Sprintf("%s\t%s\t%s\t%s\t%s", e.Time.UTC().Format(timeLayout), e.Kind, e.Name, e.Type, e.Message)
}
