package offers

import (
	"time"

	"golang.org/x/sys/unix"
)

// threadCPU returns the CPU time of the calling OS thread (the caller
// locks it): unlike wall time it does not count waiting for a core on a
// loaded machine.
func threadCPU() time.Duration {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts); err != nil {
		return 0
	}
	return time.Duration(ts.Nano())
}
