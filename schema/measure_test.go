package schema_test

import (
	"os"
	"runtime"
	"syscall"
	"testing"
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
