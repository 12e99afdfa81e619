package vm_test

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"hoist/backends"
	"hoist/e2e/cloudsim/sim"
)

// TestMeasure_provisionMany measures, through the aws driver on the cloud
// simulator, N instances (HOIST_MEASURE_N, default 10) provisioned at once
// with 30 % of the API calls failing: the time from the first Create to
// every VM running (SSH up, agents deployed, shim answering), each
// instance's time to ready, and the simulator's API calls per instance for
// create → running → terminated. It runs only with HOIST_MEASURE=1.
func TestMeasure_provisionMany(t *testing.T) {
	if os.Getenv("HOIST_MEASURE") == "" {
		t.Skip("set HOIST_MEASURE=1 to measure")
	}
	n := 10
	if v, err := strconv.Atoi(os.Getenv("HOIST_MEASURE_N")); err == nil && v > 0 {
		n = v
	}
	e := newEnv(t)
	e.cs.Faults(sim.Faults{ErrorRate: 0.3})
	start := time.Now()
	ready := make([]time.Duration, n)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []error
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := spec(fmt.Sprintf("many-%d", i))
			for {
				inst, err := e.b.Create(t.Context(), s)
				if err != nil && (backends.IsStalled(err) || errors.Is(err, backends.ErrNoCapacity) || time.Since(start) > 10*time.Minute) {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
					return
				}
				if err == nil && inst.Status == backends.StatusRunning {
					ready[i] = time.Since(start)
					return
				}
				time.Sleep(500 * time.Millisecond)
			}
		}()
	}
	wg.Wait()
	all := time.Since(start)
	if len(errs) > 0 {
		t.Fatalf("%d instances failed: %v", len(errs), errs)
	}
	for i := range n {
		id := spec(fmt.Sprintf("many-%d", i)).ID
		for {
			err := e.b.Terminate(t.Context(), id)
			if err == nil {
				break
			}
			if backends.IsStalled(err) {
				t.Fatalf("Terminate(%s): %v", id, err)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	st := e.cs.Stats()
	calls, failed := 0, 0
	for _, c := range st.Calls["aws"] {
		calls += c
	}
	for _, c := range st.Failed["aws"] {
		failed += c
	}
	slices.Sort(ready)
	t.Logf("%d instances with 30%% API errors: all running after %s; per instance ready min %s median %s max %s",
		n, all.Round(time.Millisecond), ready[0].Round(time.Millisecond), ready[n/2].Round(time.Millisecond), ready[n-1].Round(time.Millisecond))
	t.Logf("API calls create → running → terminated: %d (%.1f per instance), %d failed on purpose; by operation %v",
		calls, float64(calls)/float64(n), failed, st.Calls["aws"])
}
