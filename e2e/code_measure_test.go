package e2e

import (
	"crypto/rand"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"
)

// TestMeasure_code measures code delivery through a real hoist serve and
// Docker: a task whose `repos` is a directory of 1,000 files, 50 MB of
// incompressible content, on its first run and after a commit that changes
// one file. It prints the delivery time (manifest, missing blobs and
// placing, as the server logs it in job_code_delivered), the blobs and
// bytes that travelled, and commit → run done. Set HOIST_MEASURE=1 to run
// it; HOIST_MEASURE_FILES and HOIST_MEASURE_FILE_BYTES change 1,000 and
// 52,429.
func TestMeasure_code(t *testing.T) {
	if os.Getenv("HOIST_MEASURE") == "" {
		t.Skip("measurement: set HOIST_MEASURE=1")
	}
	files, size := 1000, 52429
	if v, err := strconv.Atoi(os.Getenv("HOIST_MEASURE_FILES")); err == nil && v > 0 {
		files = v
	}
	if v, err := strconv.Atoi(os.Getenv("HOIST_MEASURE_FILE_BYTES")); err == nil && v > 0 {
		size = v
	}
	random := func() string {
		b := make([]byte, size)
		_, _ = rand.Read(b)
		return string(b)
	}
	r := newRepo(t)
	for i := range files {
		r.write(fmt.Sprintf("code/d%02d/f%04d.bin", i%20, i), random())
	}
	spec := func(round string) string {
		return task("big", "  - find . -type f | wc -l\n") + "working_dir: /work\nrepos: [code]\nenv: [ROUND=" + round + "]\n"
	}
	r.write("big.dstack.yml", spec("1"))
	sha1 := r.commit("1,000 files")
	start := time.Now()
	s := startServer(t, r.dir)
	s.waitRun("big", sha1, "done", 5*time.Minute)
	firstDone := time.Since(start)
	if got, want := s.logs("big"), fmt.Sprintf("%d\n", files); got != want {
		t.Fatalf("the run saw %q files, want %q", got, want)
	}
	d := deliveries(s.logText())
	if len(d) != 1 {
		t.Fatalf("%d code deliveries logged, want 1", len(d))
	}
	first := d[0]

	r.write("code/d00/f0000.bin", random())
	r.write("big.dstack.yml", spec("2"))
	sha2 := r.commit("one file changed")
	start = time.Now()
	s.waitRun("big", sha2, "done", 5*time.Minute)
	secondDone := time.Since(start)
	d = deliveries(s.logText())
	if len(d) != 2 {
		t.Fatalf("%d code deliveries logged, want 2", len(d))
	}
	second := d[1]
	if second["blobs_sent"] != "1" {
		t.Errorf("after a one-file commit %s blobs travelled, want 1", second["blobs_sent"])
	}
	fmt.Printf("code delivery of %d files, %d bytes each (%.1f MB, incompressible), real hoist serve + Docker\n",
		files, size, float64(files*size)/1e6)
	for _, row := range []struct {
		name string
		kv   map[string]string
		done time.Duration
	}{{"first run", first, firstDone}, {"after a one-file commit", second, secondDone}} {
		fmt.Printf("  %-24s delivery %-12s blobs sent %5s of %5s  bytes sent %10s (on the wire %10s)  commit→done %s\n",
			row.name, row.kv["duration"], row.kv["blobs_sent"], row.kv["blobs"], row.kv["bytes_sent"], row.kv["wire_bytes"], row.done.Round(time.Millisecond))
	}
}
