package sim_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/api/types/registry"
	"github.com/docker/docker/client"

	"hoist/e2e/cloudsim/sim"
	"hoist/e2e/testenv"
)

// needPods ends the test unless pods can run here: the Docker Engine with
// the busybox test image, and root (addresses are probed on port 22, as
// for VMs). It returns the image.
func needPods(t *testing.T) string {
	t.Helper()
	img := testenv.Docker(t)
	if os.Geteuid() != 0 {
		testenv.Missing(t, "the cloud simulator allocates addresses probing port 22: run the tests as root")
	}
	return img
}

// openSim returns a Sim over dir whose pods are removed when the test ends.
func openSim(t *testing.T, dir string) *sim.Sim {
	t.Helper()
	s, err := sim.New(sim.Config{StateDir: dir, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.RemoveAllPods(); err != nil {
			t.Errorf("remove pods: %v", err)
		}
		if err := s.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return s
}

// createPod records pod id of the toy provider.
func createPod(t *testing.T, s *sim.Sim, id string) {
	t.Helper()
	if _, err := s.Create(sim.Resource{Provider: "toy", Kind: sim.KindPod, ID: id, State: sim.StatePending}); err != nil {
		t.Fatal(err)
	}
}

// waitPod waits until pod id's state satisfies done and returns it.
func waitPod(t *testing.T, s *sim.Sim, id string, done func(sim.PodState) bool) sim.PodState {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		st, err := s.PodState("toy", id)
		if err != nil {
			t.Fatalf("pod %s: %v", id, err)
		}
		if done(st) {
			return st
		}
		if time.Now().After(deadline) {
			t.Fatalf("pod %s: still %+v after 10s", id, st)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func exited(st sim.PodState) bool  { return st.ExitCode != nil }
func running(st sim.PodState) bool { return st.Running }

func TestPodServesOnItsAddressWithItsEnvironment(t *testing.T) {
	img := needPods(t)
	s := openSim(t, t.TempDir())
	createPod(t, s, "web")
	addr, err := s.StartPod("toy", "web", sim.PodSpec{
		Image:   img,
		Command: []string{"sh", "-c", `mkdir /www && echo "$GREETING" > /www/index.html && exec httpd -f -p "$HOIST_RUNNER_SSH_LISTEN" -h /www`},
		Env:     map[string]string{"GREETING": "hello from the pod"},
		Ports:   []int{10022},
	})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(addr, "127.77.") {
		t.Errorf("address %s, want one in 127.77.0.0/16", addr)
	}
	if r, _ := s.Get("toy", "web"); r.Address != addr {
		t.Errorf("resource address %q, want %q", r.Address, addr)
	}
	waitPod(t, s, "web", running)
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, err := http.Get("http://" + addr + ":10022/")
		if err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if got := strings.TrimSpace(string(b)); got != "hello from the pod" {
				t.Fatalf("pod served %q", got)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("pod not reachable at %s:10022: %v", addr, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestPodState(t *testing.T) {
	img := needPods(t)
	s := openSim(t, t.TempDir())
	code := func(c int) *int { return &c }
	for _, tc := range []struct {
		name    string
		spec    sim.PodSpec
		want    sim.PodState
		message string // a part of the message wanted
	}{
		{
			name: "a running command is running",
			spec: sim.PodSpec{Image: img, Command: []string{"sleep", "300"}},
			want: sim.PodState{Running: true},
		},
		{
			name: "the exit code of an ended command is reported, the environment passed",
			spec: sim.PodSpec{Image: img, Command: []string{"sh", "-c", `exit "$CODE"`}, Env: map[string]string{"CODE": "7"}},
			want: sim.PodState{ExitCode: code(7), Message: "exited with code 7"},
		},
		{
			name: "a command that succeeded exits with 0",
			spec: sim.PodSpec{Image: img, Command: []string{"true"}},
			want: sim.PodState{ExitCode: code(0), Message: "exited with code 0"},
		},
		{
			name:    "an image that cannot be pulled is reported",
			spec:    sim.PodSpec{Image: "127.0.0.1:1/cloudsim/missing:latest", Command: []string{"true"}},
			message: "image 127.0.0.1:1/cloudsim/missing:latest could not be pulled",
		},
		{
			name:    "a command that cannot be run is reported",
			spec:    sim.PodSpec{Image: img, Command: []string{"/no/such/program"}},
			message: "container could not be started",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id := strings.ReplaceAll(tc.name, " ", "-")
			createPod(t, s, id)
			if _, err := s.StartPod("toy", id, tc.spec); err != nil {
				t.Fatal(err)
			}
			st := waitPod(t, s, id, func(st sim.PodState) bool { return st.Running || st.ExitCode != nil || st.Message != "" })
			if tc.message != "" {
				if st.Running || st.ExitCode != nil || !strings.Contains(st.Message, tc.message) {
					t.Fatalf("state %+v, want not running with a message containing %q", st, tc.message)
				}
				return
			}
			if tc.want.ExitCode != nil {
				st = waitPod(t, s, id, exited)
			}
			if st.Running != tc.want.Running || (st.ExitCode == nil) != (tc.want.ExitCode == nil) ||
				(st.ExitCode != nil && *st.ExitCode != *tc.want.ExitCode) || st.Message != tc.want.Message {
				t.Fatalf("state %+v (exit code %v), want %+v", st, deref(st.ExitCode), tc.want)
			}
		})
	}
}

func deref(p *int) any {
	if p == nil {
		return nil
	}
	return *p
}

func TestStopPodRemovesTheContainer(t *testing.T) {
	img := needPods(t)
	dir := t.TempDir()
	s := openSim(t, dir)
	createPod(t, s, "stopped")
	if _, err := s.StartPod("toy", "stopped", sim.PodSpec{Image: img, Command: []string{"sleep", "300"}}); err != nil {
		t.Fatal(err)
	}
	waitPod(t, s, "stopped", running)
	if err := s.StopPod("toy", "stopped"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.PodState("toy", "stopped"); !errors.Is(err, sim.ErrNotFound) {
		t.Fatalf("state after StopPod: %v, want ErrNotFound", err)
	}
	out, err := exec.Command("docker", "ps", "-aq", "--filter", "label="+sim.LabelPod+"=toy/stopped", "--filter", "label="+sim.LabelSim+"="+dir).CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "" {
		t.Fatalf("containers left: %q %v", out, err)
	}
	if err := s.StopPod("toy", "stopped"); err != nil {
		t.Fatalf("StopPod of a stopped pod: %v", err)
	}
}

func TestPodOutlivesARestartOfTheSimulator(t *testing.T) {
	img := needPods(t)
	dir := t.TempDir()
	s := openSim(t, dir)
	createPod(t, s, "lasting")
	addr, err := s.StartPod("toy", "lasting", sim.PodSpec{Image: img, Command: []string{"sleep", "300"}})
	if err != nil {
		t.Fatal(err)
	}
	waitPod(t, s, "lasting", running)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openSim(t, dir)
	if st := waitPod(t, s, "lasting", running); !st.Running {
		t.Fatalf("state after restart: %+v", st)
	}
	if r, _ := s.Get("toy", "lasting"); r.Address != addr {
		t.Errorf("address after restart %q, want %q", r.Address, addr)
	}
	if _, err := s.PodState("toy", "never-created"); !errors.Is(err, sim.ErrNotFound) {
		t.Errorf("state of an unknown pod: %v, want ErrNotFound", err)
	}
}

func TestStartPodRefusesWhatIsNotAPod(t *testing.T) {
	s := openSim(t, t.TempDir())
	if _, err := s.Create(sim.Resource{Provider: "toy", Kind: sim.KindInstance, ID: "vm"}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.StartPod("toy", "vm", sim.PodSpec{Image: "busybox"}); err == nil || !strings.Contains(err.Error(), "not a pod") {
		t.Errorf("StartPod of an instance: %v", err)
	}
	if _, err := s.StartPod("toy", "nothing", sim.PodSpec{Image: "busybox"}); !errors.Is(err, sim.ErrNotFound) {
		t.Errorf("StartPod of no resource: %v, want ErrNotFound", err)
	}
}

func TestPodPullsAPrivateImageWithItsCredentials(t *testing.T) {
	img := needPods(t)
	reg := testenv.StartRegistry(t, "puller", "s3cret")
	dc, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		t.Fatal(err)
	}
	defer dc.Close()
	ctx := t.Context()
	private := reg + "/cloudsim/busybox:pods-test"
	auth, err := registry.EncodeAuthConfig(registry.AuthConfig{Username: "puller", Password: "s3cret"})
	if err != nil {
		t.Fatal(err)
	}
	if err := dc.ImageTag(ctx, img, private); err != nil {
		t.Fatal(err)
	}
	rc, err := dc.ImagePush(ctx, private, image.PushOptions{RegistryAuth: auth})
	if err != nil {
		t.Fatal(err)
	}
	out, _ := io.ReadAll(rc)
	rc.Close()
	if strings.Contains(string(out), `"error"`) {
		t.Fatalf("push %s: %s", private, out)
	}
	untag := func() {
		if _, err := dc.ImageRemove(context.Background(), private, image.RemoveOptions{}); err != nil && !strings.Contains(err.Error(), "No such image") {
			t.Errorf("untag %s: %v", private, err)
		}
	}
	untag()
	t.Cleanup(untag)

	s := openSim(t, t.TempDir())
	createPod(t, s, "wrong-password")
	if _, err := s.StartPod("toy", "wrong-password", sim.PodSpec{Image: private, Command: []string{"true"}, RegistryUsername: "puller", RegistryPassword: "wrong"}); err != nil {
		t.Fatal(err)
	}
	if st, err := s.PodState("toy", "wrong-password"); err != nil || st.Running || !strings.Contains(st.Message, "could not be pulled") {
		t.Fatalf("state with a wrong password: %+v %v", st, err)
	}
	createPod(t, s, "right-password")
	if _, err := s.StartPod("toy", "right-password", sim.PodSpec{Image: private, Command: []string{"true"}, RegistryUsername: "puller", RegistryPassword: "s3cret"}); err != nil {
		t.Fatal(err)
	}
	if st := waitPod(t, s, "right-password", exited); *st.ExitCode != 0 {
		t.Fatalf("state with the right password: %+v", st)
	}
}

func TestTestSimulatorKeepsPodsOverRestartAndRemovesThemAtTheEnd(t *testing.T) {
	img := needPods(t)
	var dir string
	t.Run("test", func(t *testing.T) {
		c := testenv.StartCloudSim(t, toy{})
		dir = c.StateDir
		createPod(t, c.Sim(), "kept")
		if _, err := c.Sim().StartPod("toy", "kept", sim.PodSpec{Image: img, Command: []string{"sleep", "300"}}); err != nil {
			t.Fatal(err)
		}
		waitPod(t, c.Sim(), "kept", running)
		c.Restart()
		waitPod(t, c.Sim(), "kept", running)
	})
	out, err := exec.Command("docker", "ps", "-aq", "--filter", "label="+sim.LabelSim+"="+dir).CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "" {
		t.Fatalf("containers left after the test: %q %v", out, err)
	}
}
