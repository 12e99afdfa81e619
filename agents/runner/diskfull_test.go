package runner_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"hoist/agents/api"
	"hoist/agents/runner"
	"hoist/e2e/testenv"
)

// TestRunner_fullDiskLosesNoOutput keeps the runner's home (where its log
// lives until acknowledged) on a tiny tmpfs that a filler file fills while
// the job prints numbered lines: once the filler is gone, every line is in
// the log, once and in order. The job's writes wait meanwhile.
func TestRunner_fullDiskLosesNoOutput(t *testing.T) {
	home := testenv.Tmpfs(t, "1m")
	c, _, wd := newRunnerWith(t, runner.Config{Home: home, Version: "test"})
	const lines = 400
	if err := c.Submit(ctx(t), api.JobSpec{Commands: []string{fmt.Sprintf("i=1; while [ $i -le %d ]; do echo line-$i; i=$((i+1)); sleep 0.005; done", lines)}, WorkingDir: wd}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Run(ctx(t)); err != nil {
		t.Fatal(err)
	}
	waitOutput(t, c, "line-20\n")
	filler := filepath.Join(home, "filler")
	f, err := os.Create(filler)
	if err != nil {
		t.Fatal(err)
	}
	for _, err = f.Write(make([]byte, 4096)); err == nil; _, err = f.Write(make([]byte, 4096)) {
	}
	_ = f.Close()
	time.Sleep(time.Second) // the job keeps printing on the full disk
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Wait(ctx(t)); err != nil {
		t.Fatalf("Wait: %v", err)
	}
	got, _ := stdout(t, c)
	var want strings.Builder
	for i := 1; i <= lines; i++ {
		fmt.Fprintf(&want, "line-%d\n", i)
	}
	if got != want.String() {
		t.Errorf("output after the disk was freed is not the %d lines once and in order: got %d lines, first %.60q", lines, strings.Count(got, "\n"), got)
	}
}
