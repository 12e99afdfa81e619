package e2e

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/client"
	"github.com/docker/docker/pkg/stdcopy"
	"golang.org/x/crypto/ssh"

	"hoist/agents/api"
	"hoist/e2e/testenv"
)

// standalonePod is a container run as a container cloud runs a pod: the
// job's image with api.StandaloneCommand as its entrypoint and the
// standalone runner's environment, on this host's network (as the cloud
// simulator runs pods), its SSH server on a loopback address of its own.
type standalonePod struct {
	t       *testing.T
	dc      *client.Client
	id      string
	sshAddr string
	hostKey ssh.PublicKey
	userKey ssh.Signer
	token   string
	// started is when the container was started.
	started time.Time
}

// serveRunnerBinary serves the hoist binary TestMain built at /runner to
// requests that carry "Authorization: Bearer auth", as the server serves
// itself to pods (the start command names it hoist-runner, under which
// name it runs as the runner), and returns its URL.
func serveRunnerBinary(t *testing.T, auth string) string {
	t.Helper()
	mux := http.NewServeMux()
	mux.HandleFunc("GET /runner", func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+auth {
			http.Error(w, "bad token", http.StatusUnauthorized)
			return
		}
		http.ServeFile(w, r, filepath.Join(bin, "hoist"))
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { srv.Close() })
	return "http://" + ln.Addr().String() + "/runner?task=standalone-e2e"
}

// freeLoopbackAddr returns a free port on a random 127.0.0.x address.
func freeLoopbackAddr(t *testing.T) string {
	t.Helper()
	n, err := rand.Int(rand.Reader, big.NewInt(250))
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.%d:0", n.Int64()+2))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

func randomToken(t *testing.T) string {
	t.Helper()
	b := make([]byte, 24)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// startStandalonePod starts the container, downloading the runner from
// url with the bearer token auth.
func startStandalonePod(t *testing.T, url, auth string) *standalonePod {
	t.Helper()
	image := testenv.Docker(t)
	dc, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dc.Close() })

	hostPub, hostPriv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	block, err := ssh.MarshalPrivateKey(hostPriv, "")
	if err != nil {
		t.Fatal(err)
	}
	hostKey, err := ssh.NewPublicKey(hostPub)
	if err != nil {
		t.Fatal(err)
	}
	_, userPriv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	userKey, err := ssh.NewSignerFromKey(userPriv)
	if err != nil {
		t.Fatal(err)
	}
	p := &standalonePod{t: t, dc: dc, sshAddr: freeLoopbackAddr(t), hostKey: hostKey, userKey: userKey, token: randomToken(t)}

	ctx := context.Background()
	created, err := dc.ContainerCreate(ctx, &container.Config{
		Image:      image,
		Entrypoint: api.StandaloneCommand(api.StandaloneOptions{ImageWorkDir: "/"}),
		Env: []string{
			api.RunnerEnvURL + "=" + url,
			api.RunnerEnvAuth + "=" + auth,
			api.RunnerEnvToken + "=" + p.token,
			api.RunnerEnvHostKey + "=" + base64.StdEncoding.EncodeToString(pem.EncodeToMemory(block)),
			// A comment and a blank line, as in an authorized_keys file.
			api.RunnerEnvAuthorizedKeys + "=# the task's key\n\n" + string(ssh.MarshalAuthorizedKey(userKey.PublicKey())),
			api.RunnerEnvSSHListen + "=" + p.sshAddr,
		},
	}, &container.HostConfig{NetworkMode: "host"}, nil, nil, "hoist-e2e-standalone-"+randomToken(t)[:12])
	if err != nil {
		t.Fatal(err)
	}
	p.id = created.ID
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("container log:\n%s", p.logs())
		}
		_ = dc.ContainerRemove(context.Background(), p.id, container.RemoveOptions{Force: true})
	})
	p.started = time.Now()
	if err := dc.ContainerStart(ctx, p.id, container.StartOptions{}); err != nil {
		t.Fatal(err)
	}
	return p
}

// logs returns the container's stdout and stderr.
func (p *standalonePod) logs() string {
	rc, err := p.dc.ContainerLogs(context.Background(), p.id, container.LogsOptions{ShowStdout: true, ShowStderr: true})
	if err != nil {
		return err.Error()
	}
	defer rc.Close()
	var out bytes.Buffer
	_, _ = stdcopy.StdCopy(&out, &out, rc)
	return out.String()
}

// dial connects to the runner's SSH server with key, pinning its host key.
func (p *standalonePod) dial(key ssh.Signer) (*ssh.Client, error) {
	return ssh.Dial("tcp", p.sshAddr, &ssh.ClientConfig{
		User:              "root",
		Auth:              []ssh.AuthMethod{ssh.PublicKeys(key)},
		HostKeyCallback:   ssh.FixedHostKey(p.hostKey),
		HostKeyAlgorithms: []string{p.hostKey.Type()},
		Timeout:           10 * time.Second,
	})
}

// waitSSH dials until the runner answers (it is downloaded first).
func (p *standalonePod) waitSSH() *ssh.Client {
	p.t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		c, err := p.dial(p.userKey)
		if err == nil {
			p.t.Cleanup(func() { c.Close() })
			return c
		}
		if time.Now().After(deadline) {
			p.t.Fatalf("ssh %s: %v", p.sshAddr, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// runnerClient returns a client of the runner's API through c: each HTTP
// connection is a direct-streamlocal channel to api.StandaloneSocket.
func (p *standalonePod) runnerClient(c *ssh.Client) *api.RunnerClient {
	hc := &http.Client{Transport: &http.Transport{
		DialContext: api.UnixDial(func(ctx context.Context, network, addr string) (net.Conn, error) {
			return c.DialContext(ctx, network, addr)
		}),
		DisableCompression: true,
	}}
	return api.NewRunnerClient(api.UnixAddr(api.StandaloneSocket), hc).WithToken(p.token)
}

// TestStandalone_podRunsTheDownloadedRunnerReachedOverSSH runs the
// standalone runner as a container cloud's pod would: the start command
// downloads it from a server that checks the bearer token, and the test
// reaches it only through its SSH port, as the server does: the API
// through direct-streamlocal before, during and after the job, the job's
// port through direct-tcpip.
func TestStandalone_podRunsTheDownloadedRunnerReachedOverSSH(t *testing.T) {
	auth := randomToken(t)
	p := startStandalonePod(t, serveRunnerBinary(t, auth), auth)
	conn := p.waitSSH()
	rc := p.runnerClient(conn)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	// Before any job: the API answers, sessions do not open.
	if h, err := rc.Health(ctx); err != nil {
		t.Fatalf("health before the job: %v", err)
	} else if h.Service != api.RunnerService {
		t.Fatalf("health = %+v, want the runner", h)
	}
	// The runner path's own cost: start the image, download the runner
	// from the server, start it, SSH handshake, API through the socket.
	t.Logf("MEASURE standalone runner: container start → runner API answering over SSH %s", time.Since(p.started).Round(time.Millisecond))
	if _, err := conn.NewSession(); err == nil {
		t.Fatal("a session opened before the job runs")
	}

	// httpd listens on 127.0.0.1 (the pod shares the host's network): the
	// port must be free there, not on another loopback address.
	_, port, _ := net.SplitHostPort(freePort(t))
	spec := api.JobSpec{
		RunName: "standalone", JobID: "standalone-0",
		Commands: []string{
			"env",
			// The runner is PID 1: what it started with shows there.
			"echo \"pid 1 environ: $(tr '\\0' '\\n' < /proc/1/environ | grep -c ^HOIST_RUNNER_) runner variables\"",
			"echo hello from the standalone runner",
			"mkdir -p /srv/www && echo pong > /srv/www/index.html",
			"exec httpd -f -p 127.0.0.1:" + port + " -h /srv/www",
		},
	}
	if err := rc.Submit(ctx, spec); err != nil {
		t.Fatalf("submit: %v", err)
	}
	if _, err := rc.Run(ctx); err != nil {
		t.Fatalf("run: %v", err)
	}
	var out strings.Builder
	followCtx, stopFollow := context.WithTimeout(ctx, 30*time.Second)
	err := rc.Follow(followCtx, 0, func(l api.LogLine) error {
		out.Write(l.Data)
		if strings.Contains(out.String(), "hello from the standalone runner\n") {
			return errStopFollow
		}
		return nil
	})
	stopFollow()
	if !errors.Is(err, errStopFollow) {
		t.Fatalf("follow: %v; logs so far:\n%s", err, out.String())
	}
	logs := out.String()
	if !strings.Contains(logs, "HOIST_RUN_NAME=standalone\n") {
		t.Fatalf("the job's env was not printed:\n%s", logs)
	}
	if !strings.Contains(logs, "pid 1 environ: 0 runner variables\n") {
		t.Fatalf("the runner's /proc/1/environ shows its variables:\n%s", logs)
	}
	if strings.Contains(logs, "HOIST_RUNNER_") {
		t.Fatalf("the job's environment holds the runner's variables:\n%s", logs)
	}

	// The job's port, through direct-tcpip, to 127.0.0.1 and localhost.
	// httpd starts after the line: wait for it.
	for _, host := range []string{"127.0.0.1", "localhost"} {
		addr := net.JoinHostPort(host, port)
		deadline := time.Now().Add(20 * time.Second)
		for {
			body, err := getThrough(conn, addr)
			if err == nil && body == "pong\n" {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("GET %s through ssh = %q, %v; want pong", addr, body, err)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}

	// The API's SSH upgrade works through the control connection too, as
	// for every runner: a user's session, with a key of its own.
	if out := upgradeAndRun(t, rc, "echo $HOIST_RUN_NAME"); out != "standalone\n" {
		t.Fatalf("session through the API's upgrade = %q, want the job's environment", out)
	}

	// Another key is refused.
	_, otherPriv, _ := ed25519.GenerateKey(rand.Reader)
	other, _ := ssh.NewSignerFromKey(otherPriv)
	if c, err := p.dial(other); err == nil {
		c.Close()
		t.Fatal("the runner accepted a key it was not given")
	}

	// After the job: the connection stays, the API answers on it and on a
	// new one while the runner lingers, sessions do not open.
	if _, err := rc.Stop(ctx, time.Second); err != nil {
		t.Fatalf("stop: %v", err)
	}
	st, err := rc.Wait(ctx)
	if err != nil || !st.Finished() {
		t.Fatalf("wait = %+v, %v; want the job finished", st, err)
	}
	if _, err := rc.Health(ctx); err != nil {
		t.Fatalf("health after the job, same connection: %v", err)
	}
	conn2 := p.waitSSH()
	if st, err := p.runnerClient(conn2).State(ctx); err != nil || st.State != api.JobTerminated {
		t.Fatalf("state after the job, new connection = %+v, %v; want terminated", st, err)
	}
	if _, err := conn2.NewSession(); err == nil {
		t.Fatal("a session opened after the job ended")
	}
}

var errStopFollow = errors.New("seen")

// upgradeAndRun opens an SSH connection through rc's SSH upgrade with a
// fresh key, runs cmd in a session and returns its output.
func upgradeAndRun(t *testing.T, rc *api.RunnerClient, cmd string) string {
	t.Helper()
	_, priv, _ := ed25519.GenerateKey(rand.Reader)
	key, _ := ssh.NewSignerFromKey(priv)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	nc, hostKey, err := rc.DialSSH(ctx, strings.TrimSpace(string(ssh.MarshalAuthorizedKey(key.PublicKey()))))
	if err != nil {
		t.Fatalf("ssh upgrade: %v", err)
	}
	pub, _, _, _, err := ssh.ParseAuthorizedKey([]byte(hostKey))
	if err != nil {
		t.Fatalf("host key %q: %v", hostKey, err)
	}
	sc, chans, reqs, err := ssh.NewClientConn(nc, "runner", &ssh.ClientConfig{
		User: "root", Auth: []ssh.AuthMethod{ssh.PublicKeys(key)},
		HostKeyCallback: ssh.FixedHostKey(pub), HostKeyAlgorithms: []string{pub.Type()},
	})
	if err != nil {
		nc.Close()
		t.Fatalf("ssh through the upgrade: %v", err)
	}
	c := ssh.NewClient(sc, chans, reqs)
	defer c.Close()
	s, err := c.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	out, err := s.Output(cmd)
	if err != nil {
		t.Fatalf("%s: %v", cmd, err)
	}
	return string(out)
}

// getThrough GETs / of addr through a direct-tcpip channel of c.
func getThrough(c *ssh.Client, addr string) (string, error) {
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) { return c.DialContext(ctx, "tcp", addr) },
	}}
	defer hc.CloseIdleConnections()
	resp, err := hc.Get("http://" + addr + "/")
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

// TestStandalone_wrongDownloadTokenEndsThePodSayingWhy checks that a pod
// whose download is refused exits 127 and its log says what failed.
func TestStandalone_wrongDownloadTokenEndsThePodSayingWhy(t *testing.T) {
	p := startStandalonePod(t, serveRunnerBinary(t, randomToken(t)), "not-the-token")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	waitC, errC := p.dc.ContainerWait(ctx, p.id, container.WaitConditionNotRunning)
	select {
	case res := <-waitC:
		if res.StatusCode != 127 {
			t.Fatalf("exit code %d, want 127; log:\n%s", res.StatusCode, p.logs())
		}
	case err := <-errC:
		t.Fatal(err)
	}
	logs := p.logs()
	for _, want := range []string{"hoist: downloading hoist-runner from http://", "with wget failed", "401"} {
		if !strings.Contains(logs, want) {
			t.Errorf("the pod's log lacks %q:\n%s", want, logs)
		}
	}
	if strings.Contains(logs, "task=standalone-e2e") {
		t.Errorf("the pod's log shows the URL's query:\n%s", logs)
	}
}
