package schema_test

import (
	"fmt"
	"os"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"testing/fstest"
	"time"

	"hoist/schema"
)

func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// TestMeasure_load10000 prints CPU time, wall time and peak RSS for
// validating a generated repo of 10,000 specs, cold and unchanged. CPU time
// is the figure to trust on a shared machine. Run with HOIST_MEASURE=1.
func TestMeasure_load10000(t *testing.T) {
	if os.Getenv("HOIST_MEASURE") == "" {
		t.Skip("set HOIST_MEASURE=1 to measure")
	}
	fsys := generateRepo(10000)
	for _, phase := range []string{"cold", "unchanged"} {
		if phase == "cold" {
			schema.DropFieldCache()
			schema.DropCachedValidators()
		}
		runtime.GC()
		c0, w0 := cpuTime(), time.Now()
		d, err := schema.Load(fsys)
		if err != nil || len(d.Resources) != 10000 {
			t.Fatalf("load: %v", err)
		}
		t.Logf("%s: 10000 specs cpu=%v wall=%v GOMAXPROCS=%d", phase, cpuTime()-c0, time.Since(w0), runtime.GOMAXPROCS(0))
	}
	if data, err := os.ReadFile("/proc/self/status"); err == nil {
		for _, l := range splitLines(string(data)) {
			if len(l) > 6 && l[:6] == "VmHWM:" {
				t.Logf("peak RSS %s", l[6:])
			}
		}
	}
}

func splitLines(s string) []string {
	var out []string
	start := 0
	for i := range s {
		if s[i] == '\n' {
			out = append(out, s[start:i])
			start = i + 1
		}
	}
	return out
}

// TestMeasure_longLists prints the CPU and wall time of validating one task
// whose commands list holds n items, written out in YAML and built by a CUE
// comprehension: linear up to MaxListItems, refused beyond it. Run with
// HOIST_MEASURE=1.
func TestMeasure_longLists(t *testing.T) {
	if os.Getenv("HOIST_MEASURE") == "" {
		t.Skip("set HOIST_MEASURE=1 to measure")
	}
	schema.Load(fstest.MapFS{"warm.dstack.yml": {Data: []byte("type: task\ncommands: [x]\n")}})
	for _, n := range []int{2500, 5000, 10_000, 100_000, 1_000_000} {
		var b strings.Builder
		b.WriteString("type: task\nname: big\nimage: x\ncommands:\n")
		for i := 0; i < n; i++ {
			fmt.Fprintf(&b, "  - %d\n", i)
		}
		cue := fmt.Sprintf("package x\nimport \"list\"\nt: {type: \"task\", commands: [for i in list.Range(0, %d, 1) {\"echo \\(i)\"}]}\n", n)
		for _, in := range []struct {
			name string
			fsys fstest.MapFS
		}{
			{"yaml", fstest.MapFS{"big.dstack.yml": {Data: []byte(b.String())}}},
			{"cue", fstest.MapFS{"big.cue": {Data: []byte(cue)}}},
		} {
			schema.DropFieldCache()
			runtime.GC()
			c0, w0 := cpuTime(), time.Now()
			_, err := schema.Load(in.fsys)
			verdict := "accepted"
			if err != nil {
				verdict = "refused: " + strings.SplitN(err.Error(), "\n", 2)[0]
			}
			t.Logf("%-4s %8d items: cpu=%-12v wall=%-12v %s", in.name, n, cpuTime()-c0, time.Since(w0), verdict)
		}
	}
}
