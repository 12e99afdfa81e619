package kubernetes

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"hoist/agents/api"
	"hoist/backends/offers"
)

// TestPodShim_sshReachesTheJobThroughThePortForward checks that the
// runner's SSH upgrade (101 Switching Protocols) passes through the Conn's
// port-forward to the runner in the pod: a command and a terminal.
func TestPodShim_sshReachesTheJobThroughThePortForward(t *testing.T) {
	c := testCluster(t)
	rec := testInstance("inst-ssh", offers.Offer{})
	cn, sc := connect(t, c, rec)
	if _, err := sc.CreateTask(t.Context(), api.TaskSpec{ID: "job-ssh", Image: testImage}); err != nil {
		t.Fatal(err)
	}
	info := waitFor(t, sc, "job-ssh", api.TaskRunning, 2*time.Minute)
	rc := api.NewRunnerClient(info.RunnerAddr, cn.HTTPClient())
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	for range 100 {
		if _, err := rc.State(ctx); err == nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	_, priv, _ := ed25519.GenerateKey(rand.Reader)
	key, _ := ssh.NewSignerFromKey(priv)
	line := strings.TrimSpace(string(ssh.MarshalAuthorizedKey(key.PublicKey())))
	if err := rc.Submit(ctx, api.JobSpec{RunName: "dev", JobID: "job-ssh", Commands: []string{"sleep 3600"}, AuthorizedKeys: []string{line}}); err != nil {
		t.Fatal(err)
	}
	if _, err := rc.Run(ctx); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	conn, hostKey, err := rc.DialSSH(ctx, "")
	if err != nil {
		t.Fatalf("DialSSH through the port-forward: %v", err)
	}
	pub, _, _, _, err := ssh.ParseAuthorizedKey([]byte(hostKey))
	if err != nil {
		t.Fatalf("host key %q: %v", hostKey, err)
	}
	scc, chans, reqs, err := ssh.NewClientConn(conn, "runner", &ssh.ClientConfig{
		User: "root", Auth: []ssh.AuthMethod{ssh.PublicKeys(key)},
		HostKeyCallback: ssh.FixedHostKey(pub), HostKeyAlgorithms: []string{pub.Type()},
	})
	if err != nil {
		t.Fatalf("SSH handshake: %v", err)
	}
	client := ssh.NewClient(scc, chans, reqs)
	defer client.Close()
	t.Logf("upgrade and SSH handshake through the port-forward: %s", time.Since(start))
	s, _ := client.NewSession()
	out, err := s.Output("echo $HOIST_RUN_NAME")
	s.Close()
	if err != nil || string(out) != "dev\n" {
		t.Errorf("exec = %q, %v; want dev", out, err)
	}
	s, _ = client.NewSession()
	if err := s.RequestPty("xterm", 24, 80, nil); err != nil {
		t.Fatalf("RequestPty: %v", err)
	}
	s.Stdin = strings.NewReader("echo hi-$((1+1)); exit\n")
	var term bytes.Buffer
	s.Stdout = &term
	if err := s.Shell(); err != nil {
		t.Fatalf("Shell: %v", err)
	}
	if err := s.Wait(); err != nil || !strings.Contains(term.String(), "hi-2\r\n") {
		t.Errorf("terminal = %q, %v; want hi-2", term.String(), err)
	}
	client.Close()
	if _, err := sc.TerminateTask(context.WithoutCancel(ctx), "job-ssh", api.ReasonTerminatedByUser, "", time.Second); err != nil {
		t.Fatal(err)
	}
	if err := sc.RemoveTask(ctx, "job-ssh"); err != nil {
		t.Fatal(err)
	}
	waitGone(t, c, rec.ID)
}
