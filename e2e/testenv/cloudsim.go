package testenv

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/url"
	"os"
	"testing"
	"time"

	"hoist/e2e/cloudsim/sim"
	"hoist/e2e/internal/sshd"
)

// CloudSim is a cloud simulator (e2e/cloudsim) running in the test's
// process, as `go run ./e2e/cloudsim` would run it.
type CloudSim struct {
	// Ready holds the providers' endpoints, the admin URL and the CA file
	// of the https endpoints; a Restart keeps them.
	sim.Ready
	// StateDir is the simulator's --state directory.
	StateDir string

	t         testing.TB
	providers []sim.Provider
	srv       *sim.Server
}

// StartCloudSim starts the cloud simulator with the given providers over a
// fresh state directory, listening on 127.0.0.1. Its VMs need sshd and
// root (they listen on port 22); without them the test ends through
// Missing. The simulator and every VM's sshd stop when the test ends, every
// attached disk is detached and every pod's container is removed.
func StartCloudSim(t testing.TB, providers ...sim.Provider) *CloudSim {
	t.Helper()
	// Not t.TempDir: the VMs' home directories are in the state, and a
	// halted VM's last processes may still be writing there while the
	// directory is removed; the removal is retried instead of failing.
	dir, err := os.MkdirTemp("", "cloudsim-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		var err error
		for range 50 {
			if err = os.RemoveAll(dir); err == nil {
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
		t.Logf("cloudsim state %s not removed: %v", dir, err)
	})
	return StartCloudSimAt(t, dir, providers...)
}

// StartCloudSimAt is StartCloudSim over the state directory dir, e.g. one
// a previous simulator left.
func StartCloudSimAt(t testing.TB, dir string, providers ...sim.Provider) *CloudSim {
	t.Helper()
	if _, err := os.Stat(sshd.Path); err != nil {
		Missing(t, "openssh-server not installed (apt-get install openssh-server): %v", err)
	}
	if os.Geteuid() != 0 {
		Missing(t, "the cloud simulator's VMs listen on port 22: run the tests as root")
	}
	c := &CloudSim{StateDir: dir, t: t, providers: providers}
	c.start()
	t.Cleanup(func() {
		if t.Failed() {
			for _, r := range c.srv.Sim.List("", sim.KindInstance) {
				t.Logf("cloudsim %s %s %s: state %s address %s %s", r.Provider, r.Kind, r.ID, r.State, r.Address, r.Message)
			}
		}
		if err := c.srv.Close(); err != nil {
			t.Errorf("stop cloudsim: %v", err)
		}
		// The test is over: no loop device or device link stays (a
		// Restart, like the command's stop, leaves them attached).
		if err := c.srv.Sim.DetachAllDisks(); err != nil {
			t.Errorf("cloudsim: detach disks: %v", err)
		}
		// Nor does a pod's container (a Restart, like the command's
		// stop, leaves them running).
		if err := c.srv.Sim.RemoveAllPods(); err != nil {
			t.Errorf("cloudsim: remove pods: %v", err)
		}
	})
	return c
}

func (c *CloudSim) start() {
	c.t.Helper()
	srv, err := sim.Serve(context.Background(), sim.ServeConfig{
		Config: sim.Config{StateDir: c.StateDir, Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))},
		Listen: "127.0.0.1:0",
	}, c.providers...)
	if err != nil {
		c.t.Fatalf("start cloudsim: %v", err)
	}
	if c.srv != nil && (c.Admin != srv.Admin || !maps.Equal(c.Endpoints, srv.Endpoints)) {
		srv.Close()
		c.t.Fatalf("restarted cloudsim moved: %+v, was %+v", srv.Ready, c.Ready)
	}
	c.srv, c.Ready = srv, srv.Ready
}

// Sim returns the simulator's state (a new one after Restart).
func (c *CloudSim) Sim() *sim.Sim { return c.srv.Sim }

// Restart stops the simulator (listeners and every VM's sshd, as SIGTERM
// stops the command) and starts it again over the same state directory, on
// the same URLs; the VMs that were running boot again with their addresses
// and host keys, and the pods' containers, left running, are found again.
func (c *CloudSim) Restart() {
	c.t.Helper()
	if err := c.srv.Close(); err != nil {
		c.t.Fatalf("stop cloudsim: %v", err)
	}
	c.start()
}

// Backend returns GET /_sim/backend/<provider>: a hoist server-config
// backend entry for the simulated provider.
func (c *CloudSim) Backend(provider string) map[string]any {
	c.t.Helper()
	var out map[string]any
	c.admin(http.MethodGet, "/_sim/backend/"+url.PathEscape(provider), nil, &out)
	return out
}

// Instances returns GET /_sim/instances: every resource ever created.
func (c *CloudSim) Instances() []sim.Resource {
	c.t.Helper()
	var out []sim.Resource
	c.admin(http.MethodGet, "/_sim/instances", nil, &out)
	return out
}

// Faults sets the injected faults (POST /_sim/faults), replacing the
// previous ones; sim.Faults{} clears them.
func (c *CloudSim) Faults(f sim.Faults) {
	c.t.Helper()
	c.admin(http.MethodPost, "/_sim/faults", f, nil)
}

// Interrupt reclaims spot instance id (POST /_sim/interrupt) and returns
// it as it is then.
func (c *CloudSim) Interrupt(id string) sim.Resource {
	c.t.Helper()
	var out sim.Resource
	c.admin(http.MethodPost, "/_sim/interrupt?id="+url.QueryEscape(id), nil, &out)
	return out
}

// Stats returns GET /_sim/stats: the API calls counted so far.
func (c *CloudSim) Stats() sim.Stats {
	c.t.Helper()
	var out sim.Stats
	c.admin(http.MethodGet, "/_sim/stats", nil, &out)
	return out
}

// WaitRunning waits until instance id of provider is running (its sshd
// accepts connections) and returns it.
func (c *CloudSim) WaitRunning(provider, id string, timeout time.Duration) sim.Resource {
	c.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		r, ok := c.srv.Sim.Get(provider, id)
		if ok && r.State == sim.StateRunning {
			return r
		}
		if r.Message != "" || time.Now().After(deadline) {
			c.t.Fatalf("cloudsim %s %s not running after %s: %s %s", provider, id, timeout, r.State, r.Message)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (c *CloudSim) admin(method, path string, in, out any) {
	c.t.Helper()
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			c.t.Fatal(err)
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, c.Admin+path, body)
	if err != nil {
		c.t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatalf("cloudsim %s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		c.t.Fatalf("cloudsim %s %s: %v", method, path, err)
	}
	if resp.StatusCode != http.StatusOK {
		c.t.Fatalf("cloudsim %s %s: %s: %s", method, path, resp.Status, b)
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			c.t.Fatalf("cloudsim %s %s: %v: %s", method, path, err, fmt.Sprintf("%.200s", b))
		}
	}
}
