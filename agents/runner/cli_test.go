package runner_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"hoist/agents/api"
	"hoist/agents/runner"
)

// tokenFile writes a runner token to a fresh file and returns its path.
func tokenFile(t *testing.T, token string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(p, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestMain_listenServesTheAPIOnLoopbackTCP(t *testing.T) {
	token := strings.Repeat("t", 40)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- runner.Main(ctx, []string{"--listen", "127.0.0.1:0", "--home", t.TempDir(),
			"--token-file", tokenFile(t, token), "--submit-timeout", "1m"}, "test", io.Discard, pw)
		pw.Close()
	}()
	// The runner logs the address it listens on.
	addrRE := regexp.MustCompile(`runner_listening addr=(127\.0\.0\.1:\d+)`)
	sc := bufio.NewScanner(pr)
	var addr string
	for sc.Scan() {
		if m := addrRE.FindStringSubmatch(sc.Text()); m != nil {
			addr = m[1]
			break
		}
	}
	go func() { _, _ = io.Copy(io.Discard, pr) }()
	if addr == "" {
		t.Fatalf("the runner logged no TCP address: %v", <-done)
	}
	hctx, hcancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer hcancel()
	h, err := api.NewRunnerClient(addr, nil).WithToken(token).Health(hctx)
	if err != nil || h.Service != api.RunnerService {
		t.Fatalf("Health at %s = %+v, %v", addr, h, err)
	}
	if _, err := api.NewRunnerClient(addr, nil).Health(hctx); !errors.Is(err, api.ErrUnauthorized) {
		t.Errorf("Health without the token = %v, want unauthorized", err)
	}
	cancel()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the runner did not exit once its context ended")
	}
}

func TestMain_listenRefusesAddressesOffLoopback(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"every interface", []string{"--listen", "0.0.0.0:10999"}, "not a loopback"},
		{"an empty host", []string{"--listen", ":10999"}, "not a loopback"},
		{"a routable address", []string{"--listen", "192.0.2.1:10999"}, "not a loopback"},
		{"a host name", []string{"--listen", "localhost:10999"}, "not a loopback"},
		{"no port", []string{"--listen", "127.0.0.1"}, "missing port"},
		{"with --socket", []string{"--listen", "127.0.0.1:10999", "--socket", "/tmp/x.sock"}, "exclude each other"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tf := tokenFile(t, strings.Repeat("t", 40))
			args := append(append([]string(nil), tt.args...), "--home", t.TempDir(), "--token-file", tf)
			err := runner.Main(t.Context(), args, "test", io.Discard, io.Discard)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Main(%v) = %v, want an error with %q", tt.args, err, tt.want)
			}
			if _, err := os.Stat(tf); err != nil {
				t.Errorf("the token file is gone although the runner refused to start: %v", err)
			}
		})
	}
}

func TestMain_terminationLogHoldsTheLastJobState(t *testing.T) {
	home, logPath := t.TempDir(), filepath.Join(t.TempDir(), "termination-log")
	// No job is submitted in time: the runner exits with its state
	// terminated by an executor error, and says so in the file.
	err := runner.Main(t.Context(), []string{"--listen", "127.0.0.1:0", "--home", home, "--submit-timeout", "10ms",
		"--token-file", tokenFile(t, strings.Repeat("t", 40)), "--termination-log", logPath}, "test", io.Discard, io.Discard)
	var ee *runner.ExitError
	if !errors.As(err, &ee) || ee.Code != 2 {
		t.Fatalf("Main = %v, want exit code 2", err)
	}
	b, err := os.ReadFile(logPath)
	if err != nil {
		t.Fatal(err)
	}
	var st api.JobState
	if err := json.Unmarshal(b, &st); err != nil || st.TerminationReason != api.ReasonExecutorError {
		t.Errorf("termination log %s: %+v, %v; want the executor error", b, st, err)
	}
}
