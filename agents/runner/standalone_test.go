package runner_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"net"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"hoist/agents/api"
	"hoist/agents/runner"
)

// TestServeSSH_controlConnectionsReachTheAPIAtAnyTimeAndOutliveTheJob
// serves a runner as --standalone does: its API on a Unix socket, SSH on a
// TCP port with a given host key and key. The API socket opens through
// that port before the job, while it runs and after it ended; sessions and
// forwarding keep the rules of every connection; the connection outlives
// the job and counts for no SSH activity; Close ends it.
func TestServeSSH_controlConnectionsReachTheAPIAtAnyTimeAndOutliveTheJob(t *testing.T) {
	_, hostPriv, _ := ed25519.GenerateKey(rand.Reader)
	hostKey, err := ssh.NewSignerFromKey(hostPriv)
	if err != nil {
		t.Fatal(err)
	}
	key, _ := userKey(t)
	r, err := runner.New(runner.Config{Home: t.TempDir(), Token: sshTestToken, SSHHostKey: hostKey})
	if err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(t.TempDir(), "runner.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: r.Handler()}
	go func() { _ = srv.Serve(ln) }()
	sln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if err := r.ServeSSH(sln, []ssh.PublicKey{key.PublicKey()}, sock); err != nil {
		t.Fatal(err)
	}
	closed := false
	t.Cleanup(func() {
		r.Stop(0, "", "test ended")
		<-r.Done()
		_ = srv.Close()
		if !closed {
			r.Close()
		}
	})
	dial := func() *ssh.Client {
		t.Helper()
		c, err := ssh.Dial("tcp", sln.Addr().String(), &ssh.ClientConfig{
			User:              "root",
			Auth:              []ssh.AuthMethod{ssh.PublicKeys(key)},
			HostKeyCallback:   ssh.FixedHostKey(hostKey.PublicKey()),
			HostKeyAlgorithms: []string{hostKey.PublicKey().Type()},
		})
		if err != nil {
			t.Fatalf("ssh: %v", err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	apiOver := func(c *ssh.Client, path string) *api.RunnerClient {
		hc := &http.Client{Transport: &http.Transport{DialContext: api.UnixDial(func(ctx context.Context, network, addr string) (net.Conn, error) {
			return c.DialContext(ctx, network, addr)
		})}}
		return api.NewRunnerClient(api.UnixAddr(path), hc).WithToken(sshTestToken)
	}
	prohibited := func(what string, err error) {
		t.Helper()
		var oce *ssh.OpenChannelError
		if !errors.As(err, &oce) || oce.Reason != ssh.Prohibited {
			t.Fatalf("%s: err = %v, want prohibited", what, err)
		}
	}

	conn := dial()
	for _, path := range []string{sock, api.StandaloneSocket} {
		if _, err := apiOver(conn, path).Health(ctx(t)); err != nil {
			t.Fatalf("health through %s before the job: %v", path, err)
		}
	}
	c := apiOver(conn, api.StandaloneSocket)
	_, err = conn.NewSession()
	prohibited("session before the job", err)
	_, err = conn.Dial("tcp", sln.Addr().String())
	prohibited("direct-tcpip before the job", err)
	_, err = conn.Dial("unix", sock+".other")
	prohibited("direct-streamlocal to another socket before the job", err)
	if a := r.SSHActivity(); a.Connections != 0 {
		t.Fatalf("activity = %+v: the control connection counted", a)
	}

	startJob(t, c, api.JobSpec{WorkingDir: t.TempDir()})
	if out, _, err := output(t, conn, "echo ok", nil); err != nil || out != "ok\n" {
		t.Fatalf("session while the job runs: %q, %v", out, err)
	}

	if _, err := c.Stop(ctx(t), 0); err != nil {
		t.Fatal(err)
	}
	if st, err := c.Wait(ctx(t)); err != nil || st.State != api.JobTerminated {
		t.Fatalf("wait = %+v, %v", st, err)
	}
	if st, err := c.State(ctx(t)); err != nil || st.State != api.JobTerminated {
		t.Fatalf("state after the job, same connection = %+v, %v", st, err)
	}
	_, err = conn.NewSession()
	prohibited("session after the job", err)
	if _, err := apiOver(dial(), api.StandaloneSocket).Health(ctx(t)); err != nil {
		t.Fatalf("health after the job, new connection: %v", err)
	}

	closed = true
	r.Close()
	done := make(chan error, 1)
	go func() { done <- conn.Wait() }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the control connection is still open after Close")
	}
	if nc, err := net.DialTimeout("tcp", sln.Addr().String(), time.Second); err == nil {
		nc.Close()
		t.Fatal("the SSH port still accepts connections after Close")
	}
}
