package shim_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"hoist/agents/api"
)

// TestShim_sshIntoTheJobsContainer reaches the runner's SSH server in a
// real container through the runner's socket, as the server does: a
// command, a terminal, and a port served inside the container.
func TestShim_sshIntoTheJobsContainer(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	info, rc := e.runTask(t, api.TaskSpec{ID: "ssh"})
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	key, _ := ssh.NewSignerFromKey(priv)
	line := strings.TrimSpace(string(ssh.MarshalAuthorizedKey(key.PublicKey())))
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	job := api.JobSpec{RunName: "dev", Commands: []string{
		"mkdir -p /www && echo served > /www/index.html && httpd -p 127.0.0.1:8080 -h /www", "echo ready", "sleep 3600",
	}}
	if err := rc.Submit(ctx, job); err != nil {
		t.Fatal(err)
	}
	if _, err := rc.Run(ctx); err != nil {
		t.Fatal(err)
	}
	waitFor(t, rc, "ready\n")

	conn, hostKey, err := rc.DialSSH(ctx, line)
	if err != nil {
		t.Fatalf("DialSSH: %v", err)
	}
	pub, _, _, _, err := ssh.ParseAuthorizedKey([]byte(hostKey))
	if err != nil {
		t.Fatalf("host key %q: %v", hostKey, err)
	}
	sc, chans, reqs, err := ssh.NewClientConn(conn, "runner", &ssh.ClientConfig{
		User: "root", Auth: []ssh.AuthMethod{ssh.PublicKeys(key)},
		HostKeyCallback: ssh.FixedHostKey(pub), HostKeyAlgorithms: []string{pub.Type()},
	})
	if err != nil {
		t.Fatalf("SSH handshake: %v", err)
	}
	client := ssh.NewClient(sc, chans, reqs)
	defer client.Close()

	s, _ := client.NewSession()
	out, err := s.Output("cat /etc/hostname; echo $HOIST_RUN_NAME")
	s.Close()
	if want := info.ContainerID[:12] + "\ndev\n"; err != nil || string(out) != want {
		t.Errorf("exec = %q, %v; want %q", out, err, want)
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

	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return client.DialContext(ctx, "tcp", "127.0.0.1:8080")
	}}}
	resp, err := hc.Get("http://job/index.html")
	if err != nil {
		t.Fatalf("GET through direct-tcpip: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(body) != "served\n" {
		t.Errorf("page through direct-tcpip = %q", body)
	}

	if _, err := rc.Stop(ctx, 0); err != nil {
		t.Fatal(err)
	}
	// The runner closes the connection once the job has ended.
	closed := make(chan struct{})
	go func() { _ = client.Wait(); close(closed) }()
	select {
	case <-closed:
	case <-ctx.Done():
		t.Error("the SSH connection outlived the job")
	}
}
