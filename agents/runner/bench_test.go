package runner_test

import (
	"bufio"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"hoist/agents/api"
	"hoist/agents/runner"
)

// BenchmarkRunner_logThroughput measures job output → runner → client on
// loopback without Docker: the job cats ~97 MB of numbered lines and the
// client follows until the log ends. Run it with -bench . -benchtime 3x.
func BenchmarkRunner_logThroughput(b *testing.B) {
	dir := b.TempDir()
	path := filepath.Join(dir, "numbers.txt")
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	w := bufio.NewWriterSize(f, 1<<20)
	var buf []byte
	for i := 1; i <= 12_000_000; i++ {
		buf = strconv.AppendInt(buf[:0], int64(i), 10)
		buf = append(buf, '\n')
		_, _ = w.Write(buf)
	}
	if err := w.Flush(); err != nil {
		b.Fatal(err)
	}
	fi, _ := f.Stat()
	f.Close()
	size := fi.Size()
	var rates []float64
	for b.Loop() {
		c, _, wd := newRunnerWith(b, runner.Config{Home: b.TempDir()})
		if err := c.Submit(b.Context(), api.JobSpec{Commands: []string{"cat " + path}, WorkingDir: wd}); err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		if _, err := c.Run(b.Context()); err != nil {
			b.Fatal(err)
		}
		var got int64
		if err := c.Follow(b.Context(), 0, func(l api.LogLine) error { got += int64(len(l.Data)); return nil }); err != nil {
			b.Fatal(err)
		}
		rates = append(rates, float64(got)/time.Since(start).Seconds()/1e6)
		if got != size {
			b.Fatalf("got %d bytes, want %d", got, size)
		}
	}
	b.SetBytes(size)
	best := 0.0
	for _, r := range rates {
		best = max(best, r)
	}
	b.ReportMetric(best, "best-MB/s")
}
