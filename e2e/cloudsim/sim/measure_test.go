package sim_test

import (
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"hoist/e2e/cloudsim/sim"
	"hoist/e2e/testenv"
)

// TestMeasure_boot50 boots 50 VMs at once and measures how long until every
// one's sshd answers, then runs a command on each over SSH and halts them.
// It runs only with HOIST_MEASURE=1.
func TestMeasure_boot50(t *testing.T) {
	if os.Getenv("HOIST_MEASURE") == "" {
		t.Skip("measurement: set HOIST_MEASURE=1")
	}
	const n = 50
	c := testenv.StartCloudSim(t, toy{})
	s := c.Sim()
	key, pub := testenv.NewAuthorizedKey(t)
	start := time.Now()
	for i := range n {
		id := fmt.Sprintf("vm-%02d", i)
		if _, err := s.Create(sim.Resource{Provider: "toy", Kind: sim.KindInstance, ID: id, State: sim.StatePending, User: "root", AuthorizedKeys: []string{pub}}); err != nil {
			t.Fatal(err)
		}
		if err := s.Boot("toy", id); err != nil {
			t.Fatal(err)
		}
	}
	booted := time.Since(start)
	var rs []sim.Resource
	for i := range n {
		rs = append(rs, c.WaitRunning("toy", fmt.Sprintf("vm-%02d", i), time.Minute))
	}
	running := time.Since(start)
	start = time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, n)
	sem := make(chan struct{}, 8) // 8 sessions at a time
	for _, r := range rs {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			if out, err := run(r, "root", key, "echo ok"); err != nil || out != "ok\n" {
				errs <- fmt.Errorf("%s: %q %v", r.Address, out, err)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	sshed := time.Since(start)
	start = time.Now()
	for _, r := range rs {
		if err := s.Halt("toy", r.ID); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("%d VMs: Boot calls %s, all running %s, ssh echo on all (8 at a time) %s, halt all %s", n, booted, running, sshed, time.Since(start))
	if out, err := run(rs[0], "root", key, "echo $PATH"); err == nil {
		t.Errorf("halted VM answers: %s", out)
	}
}
