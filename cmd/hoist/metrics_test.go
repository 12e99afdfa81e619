package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestMetricsWatch_redrawsUntilInterrupted runs `metrics -w`, interrupts it
// once it drew, and checks that every frame is the metrics golden after a
// clear screen and that the interrupt ends it with exit 0.
func TestMetricsWatch_redrawsUntilInterrupted(t *testing.T) {
	isolateClientEnv(t)
	f := newCLIFixture(t)
	want, err := os.ReadFile(filepath.Join("testdata", "cli", "metrics.golden"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var out syncBuffer
	done := make(chan int, 1)
	go func() {
		_, code := f.runCLI(ctx, &out, "metrics", "train", "-w")
		done <- code
	}()
	wait, stop := context.WithTimeout(t.Context(), time.Minute)
	defer stop()
	waitFor(t, wait, func() bool { return strings.Contains(out.String(), "gpu=1") })
	cancel()
	select {
	case code := <-done:
		if code != 0 {
			t.Fatalf("exit code %d after the interrupt, want 0", code)
		}
	case <-wait.Done():
		t.Fatal("metrics -w did not end after the interrupt")
	}
	const clear = "\x1b[H\x1b[2J"
	got := out.String()
	if !strings.HasPrefix(got, clear) {
		t.Fatalf("metrics -w output %q does not start by clearing the screen", got)
	}
	for _, frame := range strings.Split(got, clear)[1:] {
		if frame != string(want) {
			t.Errorf("frame %q, want %q", frame, want)
		}
	}
}

// TestMetricsWatch_endsWithTheRun: watching a run that has finished draws
// once and exits 0 on its own, in text and in JSON Lines.
func TestMetricsWatch_endsWithTheRun(t *testing.T) {
	isolateClientEnv(t)
	f := newCLIFixture(t)
	for _, tc := range []struct{ output, want string }{
		{"table", "\x1b[H\x1b[2JJOB  STATUS  DEVICE  UTILIZATION  MEMORY  SAMPLED\n"},
		{"json", "[]\n"},
	} {
		t.Run(tc.output, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
			defer cancel()
			var out syncBuffer
			stderr, code := f.runCLI(ctx, &out, "metrics", "hello", "-w", "-o", tc.output)
			if code != 0 || stderr != "" || ctx.Err() != nil {
				t.Fatalf("exit code %d, stderr %q, context %v", code, stderr, ctx.Err())
			}
			if out.String() != tc.want {
				t.Errorf("output %q, want %q", out.String(), tc.want)
			}
		})
	}
}

// TestMetricsWatch_printsOneJSONArrayPerFrame: with -o json each frame of
// -w is one JSON array on a line.
func TestMetricsWatch_printsOneJSONArrayPerFrame(t *testing.T) {
	isolateClientEnv(t)
	f := newCLIFixture(t)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var out syncBuffer
	done := make(chan int, 1)
	go func() {
		_, code := f.runCLI(ctx, &out, "metrics", "train", "-w", "-o", "json")
		done <- code
	}()
	wait, stop := context.WithTimeout(t.Context(), time.Minute)
	defer stop()
	waitFor(t, wait, func() bool { return strings.Contains(out.String(), "\n") })
	cancel()
	if code := <-done; code != 0 {
		t.Fatalf("exit code %d after the interrupt, want 0", code)
	}
	line, _, _ := strings.Cut(out.String(), "\n")
	var rows []jobMetrics
	if err := json.Unmarshal([]byte(line), &rows); err != nil {
		t.Fatalf("first frame %q: %v", line, err)
	}
	if len(rows) != 1 || rows[0].Latest == nil || rows[0].Latest.CPUPercent != 50 || len(rows[0].Latest.GPUs) != 2 {
		t.Errorf("first frame %+v, want train's job at 50%% CPU with two GPUs", rows)
	}
}
