package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"hoist/web"
)

// metricsEvery is how often `metrics -w` redraws: the server samples each
// job's runner every 10 s, so a new sample cannot come sooner (dstack's
// metrics command waits as long between fetches).
const metricsEvery = 10 * time.Second

// jobMetrics is one job's entry in `hoist metrics -o json`: the job and its
// newest sample (null before the first).
type jobMetrics struct {
	Run           string            `json:"run"`
	JobID         string            `json:"job_id"`
	JobName       string            `json:"job_name"`
	SubmissionNum int               `json:"submission_num"`
	Status        string            `json:"status"`
	Latest        *web.MetricsPoint `json:"latest"`
}

func newMetricsCmd() *cobra.Command {
	var o clientOptions
	var output, job string
	var watch bool
	cmd := &cobra.Command{
		Use:   "metrics RUN",
		Short: "Show a run's CPU, memory and GPU use: the newest sample of each running job",
		Long: `Show the newest resource sample the server took of each unfinished job of
RUN (--job picks one submission: its id or number): CPU in percent of one
core, memory working set over the container's limit, and per GPU its
utilization and memory in use. The server samples each job's runner every
10 s and keeps an hour of samples (the run page charts them). -w redraws
every 10 s until interrupted or the run ends (exit 0 then); with -o json
each redraw is one JSON array on a line of its own. A run with no
unfinished job has no metrics: exit 1.

` + clientHelp + "\n\n" + exitHelp,
		Args: cobra.ExactArgs(1),
	}
	check := outputFlag(cmd, &output)
	o.addProjectFlags(cmd.Flags())
	cmd.Flags().StringVar(&job, "job", "", "the submission (id or number; default every unfinished job)")
	cmd.Flags().BoolVarP(&watch, "watch", "w", false, "redraw every 10 seconds until interrupted or the run ends")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		c, err := o.connect(cmd, check)
		if err != nil {
			return err
		}
		w := cmd.OutOrStdout()
		// show prints one frame and reports whether the run has finished.
		show := func() (bool, error) {
			run, err := c.Run(cmd.Context(), args[0])
			if err != nil {
				return false, fmt.Errorf("metrics: %w", err)
			}
			rows, err := runMetrics(run, job)
			if err != nil && !(watch && finishedRun(run.Status)) {
				return false, fmt.Errorf("metrics: %w", err)
			}
			if output == "json" {
				if watch {
					return finishedRun(run.Status), json.NewEncoder(w).Encode(rows)
				}
				return false, writeJSON(w, rows)
			}
			if watch {
				fmt.Fprint(w, "\x1b[H\x1b[2J") // cursor home, clear screen
			}
			return finishedRun(run.Status), printMetrics(w, rows)
		}
		if !watch {
			_, err := show()
			return err
		}
		return watchMetrics(cmd.Context(), show)
	}
	return cmd
}

// watchMetrics calls show every metricsEvery until the run finished, ctx
// ends (an interrupt: no error) or show fails.
func watchMetrics(ctx context.Context, show func() (bool, error)) error {
	t := time.NewTicker(metricsEvery)
	defer t.Stop()
	for {
		finished, err := show()
		if ctx.Err() != nil {
			return nil // interrupted: watching ends normally
		}
		if err != nil || finished {
			return err
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// runMetrics picks the jobs `metrics` shows: the submission job names
// (an id, submission id or number), else every unfinished one; each with
// its newest sample. It fails when there is no such job.
func runMetrics(run web.Run, job string) ([]jobMetrics, error) {
	rows := []jobMetrics{}
	for _, j := range run.Jobs {
		if job != "" && j.ID != job && j.SubmissionID != job && strconv.Itoa(j.SubmissionNum) != job {
			continue
		}
		if job == "" && finishedJob(j.Status) {
			continue
		}
		row := jobMetrics{Run: run.Name, JobID: j.ID, JobName: j.JobName, SubmissionNum: j.SubmissionNum, Status: j.Status}
		if n := len(j.Metrics); n > 0 {
			row.Latest = &j.Metrics[n-1]
		}
		rows = append(rows, row)
	}
	switch {
	case len(rows) > 0:
		return rows, nil
	case job != "":
		return rows, fmt.Errorf("run %s has no job %s", run.Name, job)
	case len(run.Jobs) == 0:
		return rows, fmt.Errorf("run %s is %s and has no job yet", run.Name, run.Status)
	default:
		return rows, fmt.Errorf("run %s is %s and has no unfinished job", run.Name, run.Status)
	}
}

// printMetrics lays out rows as a table: a line per job for its CPU and
// memory, then a line per GPU.
func printMetrics(w io.Writer, rows []jobMetrics) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "JOB\tSTATUS\tDEVICE\tUTILIZATION\tMEMORY\tSAMPLED")
	for _, r := range rows {
		p := r.Latest
		if p == nil {
			fmt.Fprintf(tw, "%s\t%s\tcpu\t-\t-\tnone\n", r.JobName, r.Status)
			continue
		}
		mem := formatMemory(p.MemoryWorkingSetBytes)
		if p.MemoryLimitBytes > 0 {
			mem += "/" + formatMemory(p.MemoryLimitBytes)
		}
		fmt.Fprintf(tw, "%s\t%s\tcpu\t%.0f%%\t%s\t%s\n", r.JobName, r.Status, p.CPUPercent, mem, p.At.UTC().Format(timeLayout))
		for _, g := range p.GPUs {
			fmt.Fprintf(tw, "\t\tgpu=%d\t%.0f%%\t%s\n", g.Index, g.UtilPercent, formatMemory(g.MemoryUsedBytes))
		}
	}
	return tw.Flush()
}

// formatMemory prints bytes in MB below a GiB and in GB from there
// (1024-based, as dstack's CLI format_memory), to one decimal without a
// trailing ".0".
func formatMemory(b int64) string {
	v, unit := float64(b)/(1<<20), "MB"
	if v >= 1024 {
		v, unit = v/1024, "GB"
	}
	return strconv.FormatFloat(math.Round(v*10)/10, 'f', -1, 64) + unit
}
