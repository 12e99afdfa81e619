package shim_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"slices"
	"testing"
	"time"

	"hoist/agents/api"
)

var errFirstLine = errors.New("first line")

// BenchmarkStartOverhead measures create → first output line through shim
// and runner against a bare `docker run --rm` of the same image printing the
// same line, alternating the two in the same run. Run it with
// -bench StartOverhead -benchtime 20x; it reports medians in milliseconds.
func BenchmarkStartOverhead(b *testing.B) {
	e := newEnv(b)
	ctx := b.Context()
	var shimTimes, dockerTimes []time.Duration
	for i := 0; b.Loop(); i++ {
		// Bare docker run.
		start := time.Now()
		cmd := exec.CommandContext(ctx, "docker", "run", "--rm", "--label", "hoist.test=shim-bench", e.image, "echo", "hello")
		out, err := cmd.StdoutPipe()
		if err != nil {
			b.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		if _, err := bufio.NewReader(out).ReadString('\n'); err != nil {
			b.Fatalf("docker run: %v", err)
		}
		dockerTimes = append(dockerTimes, time.Since(start))
		_, _ = io.Copy(io.Discard, out)
		if err := cmd.Wait(); err != nil {
			b.Fatalf("docker run: %v", err)
		}

		// Shim + runner.
		id := fmt.Sprintf("bench-%d", i)
		start = time.Now()
		if _, err := e.client.CreateTask(ctx, api.TaskSpec{ID: id, Image: e.image}); err != nil {
			b.Fatal(err)
		}
		info, err := e.client.WaitTask(ctx, id, api.TaskRunning)
		if err != nil || info.Status != api.TaskRunning {
			b.Fatalf("WaitTask: %v %+v", err, info)
		}
		rc := api.NewRunnerClient(info.RunnerAddr, nil).WithToken(info.RunnerToken)
		if err := rc.Submit(ctx, api.JobSpec{Commands: []string{"echo hello"}}); err != nil {
			b.Fatal(err)
		}
		if _, err := rc.Run(ctx); err != nil {
			b.Fatal(err)
		}
		err = rc.Follow(ctx, 0, func(api.LogLine) error { return errFirstLine })
		if !errors.Is(err, errFirstLine) {
			b.Fatalf("Follow: %v", err)
		}
		shimTimes = append(shimTimes, time.Since(start))
		b.StopTimer()
		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		if _, err := e.client.TerminateTask(cctx, id, api.ReasonDoneByRunner, "", 0); err != nil {
			b.Fatal(err)
		}
		if err := e.client.RemoveTask(cctx, id); err != nil {
			b.Fatal(err)
		}
		cancel()
		b.StartTimer()
	}
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	ds, ss := median(dockerTimes), median(shimTimes)
	b.ReportMetric(ms(ds), "docker-run-ms/median")
	b.ReportMetric(ms(ss), "shim-ms/median")
	b.ReportMetric(ms(ss-ds), "overhead-ms/median")
}

func median(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

// BenchmarkLogThroughput measures how fast a job's output reaches a client
// through runner → Follow on loopback: the job cats a file of numbered lines
// (bind-mounted from the host), and the client reads until the log ends. It
// compares with `docker run` catting the same file through Docker's own log
// path to a client writing to /dev/null (minus the time of a `docker run
// true`, so that both measure streaming only), and with the job writing the
// bytes to /dev/null inside the container (the producer's ceiling, noisy). Run it with
// -bench LogThroughput -benchtime 3x.
func BenchmarkLogThroughput(b *testing.B) {
	e := newEnv(b)
	ctx := b.Context()
	dir, size := numberedFile(b, 12_000_000)
	var shimRates, dockerRates, devnullRates []float64
	for i := 0; b.Loop(); i++ {
		// docker run streaming the file through its log path to a client
		// whose stdout is /dev/null, minus the time of a `docker run true`.
		dockerRun := func(args ...string) time.Duration {
			start := time.Now()
			cmd := exec.CommandContext(ctx, "docker", append([]string{"run", "--rm", "--label", "hoist.test=shim-bench", "-v", dir + ":/data:ro", e.image}, args...)...)
			if err := cmd.Run(); err != nil {
				b.Fatalf("docker run %v: %v", args, err)
			}
			return time.Since(start)
		}
		base := dockerRun("true")
		full := dockerRun("cat", "/data/numbers.txt")
		dockerRates = append(dockerRates, float64(size)/(full-base).Seconds()/1e6)
		// The producer's ceiling: the job writing the bytes to /dev/null
		// inside the container, 100 times over (so that the container's
		// start-up noise does not dominate).
		devnull := dockerRun("sh", "-c", "i=0; while [ $i -lt 100 ]; do cat /data/numbers.txt > /dev/null; i=$((i+1)); done")
		if d := devnull - base; d > 0 {
			devnullRates = append(devnullRates, 100*float64(size)/d.Seconds()/1e6)
		}

		id := fmt.Sprintf("logbench-%d", i)
		_, rc := e.runTask(b, api.TaskSpec{ID: id, InstanceMounts: []api.InstanceMount{{InstancePath: dir, Path: "/data", ReadOnly: true}}})
		if err := rc.Submit(ctx, api.JobSpec{Commands: []string{"cat /data/numbers.txt"}}); err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		if _, err := rc.Run(ctx); err != nil {
			b.Fatal(err)
		}
		var got int64
		if err := rc.Follow(ctx, 0, func(l api.LogLine) error { got += int64(len(l.Data)); return nil }); err != nil {
			b.Fatal(err)
		}
		shimRates = append(shimRates, float64(got)/time.Since(start).Seconds()/1e6)
		if got != size {
			b.Fatalf("received %d bytes, want %d", got, size)
		}
		b.StopTimer()
		if _, err := e.client.TerminateTask(ctx, id, api.ReasonDoneByRunner, "", 0); err != nil {
			b.Fatal(err)
		}
		if err := e.client.RemoveTask(ctx, id); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	b.ReportMetric(medianF(shimRates), "runner-client-MB/s")
	b.ReportMetric(medianF(dockerRates), "docker-run-MB/s")
	b.ReportMetric(medianF(devnullRates), "in-container-devnull-MB/s")
}

func medianF(fs []float64) float64 {
	if len(fs) == 0 {
		return 0
	}
	s := slices.Clone(fs)
	slices.Sort(s)
	return s[len(s)/2]
}
