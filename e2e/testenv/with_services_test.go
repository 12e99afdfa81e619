package testenv_test

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"hoist/e2e/testenv"
)

// stubKubernetes is a kubernetes.sh that records its calls (one word each in
// calls) and starts nothing: `status` answers whether the file running
// exists, `up` sleeps the seconds in upsleep and then creates it, `down`
// removes it.
const stubKubernetes = `#!/usr/bin/env bash
W=$(cd "$(dirname "$0")" && pwd)
echo "$1" >>"$W/calls"
case $1 in
status) [ -e "$W/running" ] ;;
up) sleep "$(cat "$W/upsleep")"; touch "$W/running"; echo "KUBECONFIG=$W/admin.kubeconfig" ;;
down) rm -f "$W/running" ;;
esac
`

// waitKubeconfig is a command that waits (10 s at most) for the kubeconfig
// with-services.sh names.
const waitKubeconfig = `for i in $(seq 100); do [ -e "$HOIST_TEST_KUBECONFIG" ] && exit 0; sleep 0.1; done; exit 4`

// withServices is with-services.sh copied next to stubKubernetes in a
// directory of its own, with the lock files it takes in TMPDIR.
type withServices struct {
	dir string
}

func newWithServices(t *testing.T) withServices {
	t.Helper()
	if os.Getuid() != 0 {
		testenv.Missing(t, "with-services.sh starts Kubernetes only as root")
	}
	w := withServices{dir: t.TempDir()}
	_, file, _, _ := runtime.Caller(0)
	src, err := os.ReadFile(filepath.Join(filepath.Dir(file), "with-services.sh"))
	if err != nil {
		t.Fatal(err)
	}
	for name, body := range map[string]string{
		"with-services.sh": string(src),
		"kubernetes.sh":    stubKubernetes,
		"admin.kubeconfig": "",
		"upsleep":          "0.2",
	} {
		if err := os.WriteFile(filepath.Join(w.dir, name), []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(w.dir, "tmp"), 0o755); err != nil {
		t.Fatal(err)
	}
	return w
}

// run runs `with-services.sh sh -c script` (PostgreSQL and MinIO are taken as given) and
// returns its exit status.
func (w withServices) run(t *testing.T, script string) int {
	t.Helper()
	cmd := exec.Command("bash", filepath.Join(w.dir, "with-services.sh"), "sh", "-c", script)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, testenv.KubeconfigEnv+"=") && !strings.HasPrefix(kv, "HOIST_TEST_KUBERNETES=") &&
			!strings.HasPrefix(kv, "TMPDIR=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, "TMPDIR="+filepath.Join(w.dir, "tmp"), "HOIST_TEST_POSTGRES=postgres://unused",
		"HOIST_TEST_S3_ENDPOINT=http://unused")
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return exit.ExitCode()
	}
	if err != nil {
		t.Fatalf("with-services.sh: %v: %s", err, out)
	}
	return 0
}

func (w withServices) calls(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(w.dir, "calls"))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	return strings.Join(strings.Fields(string(b)), " ")
}

func (w withServices) set(t *testing.T, name, body string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(w.dir, name), []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestWithServices_kubernetes(t *testing.T) {
	tests := []struct {
		name      string
		running   bool
		upSleep   string
		script    string
		wantCode  int
		wantCalls string
	}{
		{name: "a cluster already up is used and left up", running: true, upSleep: "0",
			script: waitKubeconfig, wantCalls: "status up"},
		{name: "a cluster it started is stopped afterwards", upSleep: "0.2",
			script: waitKubeconfig, wantCalls: "status up down"},
		{name: "a start still under way when the command ends is stopped, then the cluster", upSleep: "30",
			script: "exit 5", wantCode: 5, wantCalls: "status up down"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := newWithServices(t)
			w.set(t, "upsleep", tt.upSleep)
			if tt.running {
				w.set(t, "running", "")
			}
			start := time.Now()
			if code := w.run(t, tt.script); code != tt.wantCode {
				t.Errorf("exit status %d, want %d", code, tt.wantCode)
			}
			if d := time.Since(start); d > 10*time.Second {
				t.Errorf("with-services.sh took %s", d)
			}
			got := w.calls(t)
			if tt.upSleep == "30" { // killed before or after the stub logged `up`
				got = strings.Replace(got, "status down", "status up down", 1)
			}
			if got != tt.wantCalls {
				t.Errorf("kubernetes.sh calls %q, want %q", got, tt.wantCalls)
			}
			if entries, _ := os.ReadDir(filepath.Join(w.dir, "tmp")); len(entries) != 1 { // the users lock
				t.Errorf("left in TMPDIR: %v", entries)
			}
			if _, err := os.Stat(filepath.Join(w.dir, "running")); err == nil != tt.running {
				t.Errorf("the cluster runs afterwards: %v, want %v", err == nil, tt.running)
			}
		})
	}
}

func TestWithServices_kubernetesStoppedByTheLastOfTwoRuns(t *testing.T) {
	tests := []struct {
		name          string
		first, second string
	}{
		{name: "the first run ends last", first: "sleep 2", second: "true"},
		{name: "the second run, started once the cluster is up, ends last", first: "sleep 0.5", second: "sleep 2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := newWithServices(t)
			var wg sync.WaitGroup
			wg.Add(1)
			go func() {
				defer wg.Done()
				if code := w.run(t, "("+waitKubeconfig+") && "+tt.first); code != 0 {
					t.Errorf("the first run: exit status %d", code)
				}
			}()
			time.Sleep(300 * time.Millisecond) // the stub's up takes 0.2 s
			if code := w.run(t, "("+waitKubeconfig+") && "+tt.second); code != 0 {
				t.Errorf("the second run: exit status %d", code)
			}
			wg.Wait()
			if got := w.calls(t); got != "status up status up down" {
				t.Errorf("kubernetes.sh calls %q, want %q (one down, by the run ending last)", got, "status up status up down")
			}
		})
	}
}
