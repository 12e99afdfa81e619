package main

import (
	"bufio"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"hoist/e2e/cloudsim/sim"
)

// TestMain runs the command itself when the test binary is started as it
// (the test below does, with CLOUDSIM_AS_COMMAND=1).
func TestMain(m *testing.M) {
	if os.Getenv("CLOUDSIM_AS_COMMAND") == "1" {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func TestCommand_printsReadyLineAndStopsOnSIGTERM(t *testing.T) {
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "--listen", "127.0.0.1:0", "--state", dir)
	cmd.Env = append(os.Environ(), "CLOUDSIM_AS_COMMAND=1")
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	line, err := bufio.NewReader(out).ReadBytes('\n')
	if err != nil {
		t.Fatal(err)
	}
	var ready sim.Ready
	if err := json.Unmarshal(line, &ready); err != nil {
		t.Fatalf("ready line %q: %v", line, err)
	}
	if len(ready.Endpoints) != len(providers()) || ready.CAFile == "" {
		t.Errorf("ready line %s", line)
	}
	if _, err := os.Stat(ready.CAFile); err != nil {
		t.Error(err)
	}
	resp, err := http.Get(ready.Admin + "/_sim/instances")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /_sim/instances: %s", resp.Status)
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("after SIGTERM: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("still running 10 s after SIGTERM")
	}
}
