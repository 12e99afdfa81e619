package runner_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/binary"
	"encoding/pem"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"hoist/agents/api"
	"hoist/agents/runner"
)

const sshTestToken = "ssh-test-token-0123456789abcdef0123456789"

// sshRunner serves a fresh runner on a Unix socket behind its token, as
// Main does, and returns its client.
func sshRunner(t testing.TB, cfg runner.Config) (*api.RunnerClient, *runner.Runner) {
	t.Helper()
	if cfg.Home == "" {
		cfg.Home = t.TempDir()
	}
	cfg.Token = sshTestToken
	r, err := runner.New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	sock := filepath.Join(t.TempDir(), "runner.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: r.Handler()}
	served := make(chan struct{})
	go func() { _ = srv.Serve(ln); close(served) }()
	t.Cleanup(func() {
		r.Stop(0, "", "test ended")
		<-r.Done()
		_ = srv.Close()
		<-served
		r.Close()
	})
	return api.NewRunnerClient(api.UnixAddr(sock), nil).WithToken(sshTestToken), r
}

// userKey returns a fresh ed25519 key as a signer and an authorized_keys line.
func userKey(t testing.TB) (ssh.Signer, string) {
	t.Helper()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	s, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	return s, strings.TrimSpace(string(ssh.MarshalAuthorizedKey(s.PublicKey())))
}

// startJob submits and runs job, which should keep running.
func startJob(t testing.TB, c *api.RunnerClient, job api.JobSpec) {
	t.Helper()
	if len(job.Commands) == 0 {
		job.Commands = []string{"sleep 3600"}
	}
	if err := c.Submit(ctx(t), job); err != nil {
		t.Fatalf("Submit: %v", err)
	}
	if _, err := c.Run(ctx(t)); err != nil {
		t.Fatalf("Run: %v", err)
	}
}

// dialSSH opens an SSH connection to the runner with key, pinning the host
// key the upgrade answered with; headerKey is sent as the connection's own
// authorized key.
func dialSSH(t testing.TB, c *api.RunnerClient, key ssh.Signer, headerKey string) (*ssh.Client, string, error) {
	t.Helper()
	conn, hostKey, err := c.DialSSH(ctx(t), headerKey)
	if err != nil {
		return nil, "", err
	}
	pub, _, _, _, err := ssh.ParseAuthorizedKey([]byte(hostKey))
	if err != nil {
		conn.Close()
		t.Fatalf("host key %q: %v", hostKey, err)
	}
	sc, chans, reqs, err := ssh.NewClientConn(conn, "runner", &ssh.ClientConfig{
		User:              "root",
		Auth:              []ssh.AuthMethod{ssh.PublicKeys(key)},
		HostKeyCallback:   ssh.FixedHostKey(pub),
		HostKeyAlgorithms: []string{pub.Type()},
	})
	if err != nil {
		conn.Close()
		return nil, hostKey, err
	}
	client := ssh.NewClient(sc, chans, reqs)
	t.Cleanup(func() { client.Close() })
	return client, hostKey, nil
}

func mustDial(t testing.TB, c *api.RunnerClient, key ssh.Signer, headerKey string) *ssh.Client {
	t.Helper()
	client, _, err := dialSSH(t, c, key, headerKey)
	if err != nil {
		t.Fatalf("SSH: %v", err)
	}
	return client
}

// output runs cmd in a new session and returns its stdout, stderr and
// Wait's error.
func output(t testing.TB, client *ssh.Client, cmd string, prepare func(*ssh.Session)) (string, string, error) {
	t.Helper()
	s, err := client.NewSession()
	if err != nil {
		t.Fatalf("NewSession: %v", err)
	}
	defer s.Close()
	var out, errs bytes.Buffer
	s.Stdout, s.Stderr = &out, &errs
	if prepare != nil {
		prepare(s)
	}
	err = s.Run(cmd)
	return out.String(), errs.String(), err
}

func TestSSH_publicKeyAuthentication(t *testing.T) {
	project, projectLine := userKey(t)
	user, userLine := userKey(t)
	stranger, _ := userKey(t)
	c, _ := sshRunner(t, runner.Config{})
	startJob(t, c, api.JobSpec{AuthorizedKeys: []string{projectLine + " project@hoist"}, WorkingDir: t.TempDir()})
	tests := []struct {
		name      string
		key       ssh.Signer
		headerKey string
		ok        bool
	}{
		{"the job's authorized key is accepted", project, "", true},
		{"the connection's own key is accepted", user, userLine, true},
		{"the job's key is accepted beside a connection key", project, userLine, true},
		{"a key of another connection is refused", user, "", false},
		{"any other key is refused", stranger, userLine, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			client, _, err := dialSSH(t, c, tt.key, tt.headerKey)
			if tt.ok != (err == nil) {
				t.Fatalf("SSH err = %v, want success %v", err, tt.ok)
			}
			if err == nil {
				if out, _, err := output(t, client, "echo ok", nil); err != nil || out != "ok\n" {
					t.Errorf("echo ok = %q, %v", out, err)
				}
			}
		})
	}
}

func TestSSH_upgradeRefusals(t *testing.T) {
	c, _ := sshRunner(t, runner.Config{})
	startJob(t, c, api.JobSpec{WorkingDir: t.TempDir()})
	_, line := userKey(t)
	if _, _, err := c.WithToken("wrong-token-0123456789abcdef0123456789").DialSSH(ctx(t), line); !isStatus(err, http.StatusUnauthorized) {
		t.Errorf("DialSSH with a wrong token: err = %v, want 401", err)
	}
	if _, _, err := c.DialSSH(ctx(t), `command="true" `+line); !isStatus(err, http.StatusBadRequest) {
		t.Errorf("DialSSH with an authorized key with options: err = %v, want 400", err)
	}
	if err := c.Submit(ctx(t), api.JobSpec{Commands: []string{"true"}, AuthorizedKeys: []string{"ssh-ed25519 garbage"}}); err == nil {
		t.Errorf("Submit after Run succeeded")
	}
}

func TestSSH_submitRefusesMalformedAuthorizedKeys(t *testing.T) {
	_, line := userKey(t)
	tests := []struct {
		name string
		keys []string
	}{
		{"not a key", []string{"ssh-ed25519 garbage"}},
		{"options are not enforced so refused", []string{`from="10.0.0.1" ` + line}},
		{"two keys on one line", []string{line + "\n" + line}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, _ := sshRunner(t, runner.Config{})
			err := c.Submit(ctx(t), api.JobSpec{Commands: []string{"true"}, AuthorizedKeys: tt.keys})
			if !isStatus(err, http.StatusBadRequest) || !strings.Contains(err.Error(), "authorized_keys[0]") {
				t.Errorf("Submit: err = %v, want 400 naming authorized_keys[0]", err)
			}
		})
	}
}

func TestSSH_execReportsExitStatusAndStderr(t *testing.T) {
	key, line := userKey(t)
	c, _ := sshRunner(t, runner.Config{})
	startJob(t, c, api.JobSpec{AuthorizedKeys: []string{line}, WorkingDir: t.TempDir()})
	client := mustDial(t, c, key, "")
	tests := []struct {
		name           string
		cmd            string
		stdout, stderr string
		status         int
		signal         string
	}{
		{"exit zero", "echo out", "out\n", "", 0, ""},
		{"non-zero exit with stderr apart", "echo out; echo err >&2; exit 3", "out\n", "err\n", 3, ""},
		{"killed by a signal", "echo out; kill -TERM $$", "out\n", "", -1, "TERM"},
		{"command not found", "no-such-command-hoist", "", "not found", 127, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, errs, err := output(t, client, tt.cmd, nil)
			if out != tt.stdout || !strings.Contains(errs, tt.stderr) || (tt.stderr == "" && errs != "") {
				t.Errorf("stdout %q stderr %q, want %q and %q", out, errs, tt.stdout, tt.stderr)
			}
			var ee *ssh.ExitError
			switch {
			case tt.status == 0 && tt.signal == "":
				if err != nil {
					t.Errorf("Run: %v, want success", err)
				}
			case !errors.As(err, &ee):
				t.Errorf("Run: %v, want an exit error", err)
			case tt.signal != "" && ee.Signal() != tt.signal:
				t.Errorf("exit signal %q, want %q", ee.Signal(), tt.signal)
			case tt.signal == "" && ee.ExitStatus() != tt.status:
				t.Errorf("exit status %d, want %d", ee.ExitStatus(), tt.status)
			}
		})
	}
}

func TestSSH_sessionHasTheJobsEnvironmentAndWorkingDir(t *testing.T) {
	key, line := userKey(t)
	c, _ := sshRunner(t, runner.Config{})
	wd := filepath.Join(t.TempDir(), "work")
	startJob(t, c, api.JobSpec{
		RunName: "dev", JobID: "job-7", AuthorizedKeys: []string{line}, WorkingDir: wd,
		Env: map[string]string{"GREETING": "hi"}, Secrets: map[string]string{"TOKEN": "s3cret"},
	})
	client := mustDial(t, c, key, "")
	out, _, err := output(t, client, `pwd; echo "$GREETING $TOKEN $HOIST_RUN_NAME $HOIST_JOB_ID $DSTACK_WORKING_DIR $FROM_CLIENT"; id -u`,
		func(s *ssh.Session) {
			if err := s.Setenv("FROM_CLIENT", "sent"); err != nil {
				t.Errorf("Setenv: %v", err)
			}
		})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	want := wd + "\nhi s3cret dev job-7 " + wd + " sent\n" + strconv.Itoa(os.Getuid()) + "\n"
	if out != want {
		t.Errorf("stdout = %q, want %q", out, want)
	}
}

func TestSSH_stdinReachesTheCommandUntilEOF(t *testing.T) {
	key, line := userKey(t)
	c, _ := sshRunner(t, runner.Config{})
	startJob(t, c, api.JobSpec{AuthorizedKeys: []string{line}, WorkingDir: t.TempDir()})
	client := mustDial(t, c, key, "")
	out, _, err := output(t, client, "wc -c; echo done", func(s *ssh.Session) {
		s.Stdin = strings.NewReader(strings.Repeat("x", 100000))
	})
	if err != nil || strings.Fields(out)[0] != "100000" || !strings.HasSuffix(out, "done\n") {
		t.Errorf("wc -c of 100000 bytes = %q, %v", out, err)
	}
}

func TestSSH_ptyShell(t *testing.T) {
	key, line := userKey(t)
	c, _ := sshRunner(t, runner.Config{})
	startJob(t, c, api.JobSpec{AuthorizedKeys: []string{line}, WorkingDir: t.TempDir()})
	client := mustDial(t, c, key, "")
	s, err := client.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	// The client's terminal modes apply: backspace sends ^H, no echo.
	if err := s.RequestPty("xterm-256color", 24, 80, ssh.TerminalModes{ssh.VERASE: 8, ssh.ECHO: 0}); err != nil {
		t.Fatalf("RequestPty: %v", err)
	}
	stdin, err := s.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	var out syncBuffer
	s.Stdout = &out
	if err := s.Shell(); err != nil {
		t.Fatalf("Shell: %v", err)
	}
	if err := s.WindowChange(50, 132); err != nil {
		t.Fatalf("WindowChange: %v", err)
	}
	// The size is read back once the window change has surely arrived: the
	// requests of one channel are handled in order, and so is the input.
	if _, err := io.WriteString(stdin, "tty; echo \"term=$TERM\"; stty size; stty -a; echo hi; exit 4\n"); err != nil {
		t.Fatal(err)
	}
	err = s.Wait()
	var ee *ssh.ExitError
	if !errors.As(err, &ee) || ee.ExitStatus() != 4 {
		t.Errorf("Wait: %v, want exit status 4", err)
	}
	got := out.String()
	for _, want := range []string{"/dev/pts/", "term=xterm-256color\r\n", "50 132\r\n", "erase = ^H;", " -echo ", "hi\r\n"} {
		if !strings.Contains(got, want) {
			t.Errorf("terminal output %q lacks %q", got, want)
		}
	}
}

func TestSSH_signalReachesTheCommand(t *testing.T) {
	key, line := userKey(t)
	c, _ := sshRunner(t, runner.Config{})
	startJob(t, c, api.JobSpec{AuthorizedKeys: []string{line}, WorkingDir: t.TempDir()})
	client := mustDial(t, c, key, "")
	s, err := client.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	stdout, err := s.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(`trap 'echo got; exit 7' USR1; echo ready; while :; do sleep 0.05; done`); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(stdout)
	if l, err := br.ReadString('\n'); err != nil || l != "ready\n" {
		t.Fatalf("first line %q, %v", l, err)
	}
	if err := s.Signal(ssh.SIGUSR1); err != nil {
		t.Fatalf("Signal: %v", err)
	}
	rest, _ := io.ReadAll(br)
	err = s.Wait()
	var ee *ssh.ExitError
	if !errors.As(err, &ee) || ee.ExitStatus() != 7 || string(rest) != "got\n" {
		t.Errorf("after SIGUSR1: output %q, Wait %v; want got and exit 7", rest, err)
	}
}

func TestSSH_forwardingDialsFromTheRunner(t *testing.T) {
	key, line := userKey(t)
	c, _ := sshRunner(t, runner.Config{})
	startJob(t, c, api.JobSpec{AuthorizedKeys: []string{line}, WorkingDir: t.TempDir()})
	// A service inside the job: here, a listener on this host's loopback.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer conn.Close()
				l, _ := bufio.NewReader(conn).ReadString('\n')
				_, _ = io.WriteString(conn, "echo: "+l)
			}()
		}
	}()
	client := mustDial(t, c, key, "")
	for i := range 3 {
		conn, err := client.DialContext(ctx(t), "tcp", ln.Addr().String())
		if err != nil {
			t.Fatalf("dial %s through SSH: %v", ln.Addr(), err)
		}
		_, _ = io.WriteString(conn, "hello "+strconv.Itoa(i)+"\n")
		got, err := io.ReadAll(conn)
		conn.Close()
		if want := "echo: hello " + strconv.Itoa(i) + "\n"; err != nil || string(got) != want {
			t.Errorf("answer %q, %v; want %q", got, err, want)
		}
	}
	// A Unix socket inside (direct-streamlocal@openssh.com).
	sock := filepath.Join(t.TempDir(), "svc.sock")
	uln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer uln.Close()
	go func() {
		conn, err := uln.Accept()
		if err == nil {
			_, _ = io.WriteString(conn, "from the socket\n")
			conn.Close()
		}
	}()
	uc, err := client.Dial("unix", sock)
	if err != nil {
		t.Fatalf("dial %s through SSH: %v", sock, err)
	}
	if got, err := io.ReadAll(uc); err != nil || string(got) != "from the socket\n" {
		t.Errorf("from the Unix socket: %q, %v", got, err)
	}
	uc.Close()
	// A port nobody listens on is refused at channel open.
	closed, _ := net.Listen("tcp", "127.0.0.1:0")
	addr := closed.Addr().String()
	closed.Close()
	var oce *ssh.OpenChannelError
	if _, err := client.DialContext(ctx(t), "tcp", addr); !errors.As(err, &oce) || oce.Reason != ssh.ConnectionFailed {
		t.Errorf("dial of a closed port: err = %v, want connection failed", err)
	}
}

func TestSSH_channelsAreRefusedBeforeTheJobRuns(t *testing.T) {
	key, line := userKey(t)
	c, _ := sshRunner(t, runner.Config{})
	if err := c.Submit(ctx(t), api.JobSpec{Commands: []string{"sleep 3600"}, AuthorizedKeys: []string{line}, WorkingDir: t.TempDir()}); err != nil {
		t.Fatal(err)
	}
	client := mustDial(t, c, key, "")
	_, err := client.NewSession()
	var oce *ssh.OpenChannelError
	if !errors.As(err, &oce) || oce.Reason != ssh.Prohibited || !strings.Contains(oce.Message, "not started") {
		t.Fatalf("session before Run: err = %v, want prohibited: not started", err)
	}
	// The same connection works once the job runs.
	if _, err := c.Run(ctx(t)); err != nil {
		t.Fatal(err)
	}
	if out, _, err := output(t, client, "echo ok", nil); err != nil || out != "ok\n" {
		t.Errorf("after Run: %q, %v", out, err)
	}
}

func TestSSH_jobEndClosesConnectionsAndSessions(t *testing.T) {
	key, line := userKey(t)
	c, r := sshRunner(t, runner.Config{})
	startJob(t, c, api.JobSpec{AuthorizedKeys: []string{line}, WorkingDir: t.TempDir()})
	client := mustDial(t, c, key, "")
	s, err := client.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.RequestPty("xterm", 24, 80, nil); err != nil {
		t.Fatal(err)
	}
	stdin, _ := s.StdinPipe()
	stdout, _ := s.StdoutPipe()
	if err := s.Shell(); err != nil {
		t.Fatal(err)
	}
	// The interactive shell runs a background job in a process group of
	// its own.
	_, _ = io.WriteString(stdin, "sleep 3600 & echo pid=$!\n")
	var left int
	for sc := bufio.NewScanner(stdout); left == 0 && sc.Scan(); {
		if m := regexp.MustCompile(`pid=(\d+)`).FindStringSubmatch(sc.Text()); m != nil {
			left, _ = strconv.Atoi(m[1])
		}
	}
	if left == 0 {
		t.Fatal("the shell printed no pid")
	}
	// A command that ended leaves a process behind.
	out, _, err := output(t, client, "sleep 3600 >/dev/null 2>&1 & echo $!", nil)
	if err != nil {
		t.Fatal(err)
	}
	orphan, _ := strconv.Atoi(strings.TrimSpace(out))
	if _, err := c.Stop(ctx(t), 0); err != nil {
		t.Fatal(err)
	}
	if err := client.Wait(); err == nil {
		t.Errorf("connection Wait = nil after the job ended")
	}
	for _, pid := range []int{left, orphan} {
		if alive(pid) {
			t.Errorf("process %d a session started survived the job", pid)
		}
	}
	if _, _, err := c.DialSSH(ctx(t), line); !errors.Is(err, api.ErrConflict) {
		t.Errorf("DialSSH after the job ended: err = %v, want conflict", err)
	}
	if a := r.SSHActivity(); a.Connections != 0 {
		t.Errorf("activity after the job ended = %+v", a)
	}
}

func TestSSH_activityCountsAuthenticatedConnections(t *testing.T) {
	key, line := userKey(t)
	stranger, _ := userKey(t)
	clock := &fakeClock{t: time.Date(2026, 11, 24, 8, 0, 0, 0, time.UTC)}
	c, _ := sshRunner(t, runner.Config{Now: clock.Now})
	a, err := c.SSHActivity(ctx(t))
	if err != nil || a != (api.SSHActivity{}) {
		t.Errorf("activity before Run = %+v, %v; want zero", a, err)
	}
	startJob(t, c, api.JobSpec{AuthorizedKeys: []string{line}, WorkingDir: t.TempDir()})
	started := clock.Now()
	if a, _ := c.SSHActivity(ctx(t)); a.Connections != 0 || !a.IdleSince.Equal(started) {
		t.Errorf("activity after Run = %+v, want idle since %v", a, started)
	}
	if _, _, err := dialSSH(t, c, stranger, ""); err == nil {
		t.Fatal("a stranger's key was accepted")
	}
	clock.Set(started.Add(time.Minute))
	one := mustDial(t, c, key, "")
	two := mustDial(t, c, key, "")
	// The server counts a connection a moment after the client's
	// handshake returned.
	if a := waitActivity(t, c, 2); !a.IdleSince.IsZero() {
		t.Errorf("activity with two connections = %+v", a)
	}
	one.Close()
	waitActivity(t, c, 1)
	if a, _ := c.SSHActivity(ctx(t)); !a.IdleSince.IsZero() {
		t.Errorf("activity with one connection left = %+v", a)
	}
	clock.Set(started.Add(2 * time.Minute))
	two.Close()
	a = waitActivity(t, c, 0)
	if !a.IdleSince.Equal(started.Add(2 * time.Minute)) {
		t.Errorf("activity after the last close = %+v, want idle since %v", a, started.Add(2*time.Minute))
	}
}

// waitActivity waits until the runner counts n connections: a client's
// close reaches the server a moment later.
func waitActivity(t *testing.T, c *api.RunnerClient, n int) api.SSHActivity {
	t.Helper()
	for {
		a, err := c.SSHActivity(ctx(t))
		if err != nil {
			t.Fatal(err)
		}
		if a.Connections == n {
			return a
		}
		select {
		case <-ctx(t).Done():
			t.Fatalf("activity = %+v, want %d connections", a, n)
		case <-time.After(10 * time.Millisecond):
		}
	}
}

func TestSSH_hostKeyIsKeptAcrossRestarts(t *testing.T) {
	key, line := userKey(t)
	home := t.TempDir()
	var keys []string
	for range 2 {
		c, _ := sshRunner(t, runner.Config{Home: home})
		startJob(t, c, api.JobSpec{AuthorizedKeys: []string{line}, WorkingDir: t.TempDir()})
		_, hostKey, err := dialSSH(t, c, key, "")
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, hostKey)
	}
	if keys[0] != keys[1] || !strings.HasPrefix(keys[0], "ssh-ed25519 ") {
		t.Errorf("host keys %q, want one ed25519 key", keys)
	}
	fi, err := os.Stat(filepath.Join(home, "ssh_host_ed25519_key"))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("host key file: %v, %v; want mode 0600", fi.Mode(), err)
	}
}

func TestSSH_sftpSubsystemRunsTheImagesSFTPServer(t *testing.T) {
	if _, err := os.Stat("/usr/lib/openssh/sftp-server"); err != nil {
		t.Skip("SKIP: no /usr/lib/openssh/sftp-server on this machine")
	}
	key, line := userKey(t)
	c, _ := sshRunner(t, runner.Config{})
	startJob(t, c, api.JobSpec{AuthorizedKeys: []string{line}, WorkingDir: t.TempDir()})
	client := mustDial(t, c, key, "")
	s, err := client.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	stdin, _ := s.StdinPipe()
	stdout, _ := s.StdoutPipe()
	if err := s.RequestSubsystem("sftp"); err != nil {
		t.Fatalf("RequestSubsystem: %v", err)
	}
	// SSH_FXP_INIT version 3; the answer is SSH_FXP_VERSION (2)
	// (draft-ietf-secsh-filexfer-02 section 4).
	_, _ = stdin.Write([]byte{0, 0, 0, 5, 1, 0, 0, 0, 3})
	var hdr [5]byte
	if _, err := io.ReadFull(stdout, hdr[:]); err != nil {
		t.Fatalf("read the sftp answer: %v", err)
	}
	if binary.BigEndian.Uint32(hdr[:4]) < 5 || hdr[4] != 2 {
		t.Errorf("sftp answer header %v, want SSH_FXP_VERSION", hdr)
	}
}

func TestSSH_leavesNoGoroutines(t *testing.T) {
	t.Run("connections", func(t *testing.T) {
		key, line := userKey(t)
		c, _ := sshRunner(t, runner.Config{})
		startJob(t, c, api.JobSpec{AuthorizedKeys: []string{line}, WorkingDir: t.TempDir()})
		client := mustDial(t, c, key, "")
		if _, _, err := output(t, client, "echo ok", nil); err != nil {
			t.Fatal(err)
		}
		s, _ := client.NewSession()
		_ = s.RequestPty("xterm", 24, 80, nil)
		_ = s.Start("sleep 3600")
		ln, _ := net.Listen("tcp", "127.0.0.1:0")
		defer ln.Close()
		go func() {
			conn, err := ln.Accept()
			if err == nil {
				_, _ = io.Copy(io.Discard, conn) // holds its end open
				conn.Close()
			}
		}()
		if _, err := client.Dial("tcp", ln.Addr().String()); err != nil {
			t.Fatal(err)
		}
		if n := sshGoroutines(); n == 0 {
			t.Fatal("no SSH goroutine found while a connection is open: the check below would prove nothing")
		}
		client.Close()
	})
	// The subtest's cleanup has ended the job and the runner.
	for sshGoroutines() > 0 {
		select {
		case <-ctx(t).Done():
			stacks := make([]byte, 1<<20)
			t.Fatalf("SSH goroutines left:\n%s", stacks[:runtime.Stack(stacks, true)])
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// sshGoroutines counts the goroutines running the runner's SSH code.
func sshGoroutines() int {
	stacks := make([]byte, 1<<20)
	stacks = stacks[:runtime.Stack(stacks, true)]
	n := 0
	for g := range bytes.SplitSeq(stacks, []byte("\n\n")) {
		if bytes.Contains(g, []byte("hoist/agents/runner.(*sshServer)")) || bytes.Contains(g, []byte("hoist/agents/runner.(*session)")) ||
			bytes.Contains(g, []byte("hoist/agents/runner.forward")) {
			n++
		}
	}
	return n
}

// fakeClock is a settable clock.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = t
}

// syncBuffer is a bytes.Buffer safe for one writer and one reader.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

func TestSSH_sessionShellIsTheJobsOrTheUsersLoginShell(t *testing.T) {
	login := "/bin/sh"
	if b, err := os.ReadFile("/etc/passwd"); err == nil {
		for l := range strings.SplitSeq(string(b), "\n") {
			if f := strings.Split(l, ":"); len(f) == 7 && f[2] == strconv.Itoa(os.Getuid()) {
				if fi, err := os.Stat(f[6]); err == nil && fi.Mode()&0o111 != 0 && !strings.HasSuffix(f[6], "nologin") && !strings.HasSuffix(f[6], "false") {
					login = f[6]
				}
			}
		}
	}
	tests := []struct {
		name  string
		shell string
		want  string
	}{
		{"the job's shell when its spec names one", "/bin/sh", "/bin/sh"},
		{"the user's login shell otherwise", "", login},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			key, line := userKey(t)
			c, _ := sshRunner(t, runner.Config{})
			startJob(t, c, api.JobSpec{AuthorizedKeys: []string{line}, Shell: tt.shell, WorkingDir: t.TempDir()})
			client := mustDial(t, c, key, "")
			if out, _, err := output(t, client, `echo "$0"`, nil); err != nil || out != tt.want+"\n" {
				t.Errorf("$0 = %q, %v; want %s", out, err, tt.want)
			}
		})
	}
}

// TestSSH_openSSHClient drives the runner's SSH server with OpenSSH's ssh
// and scp, as users and IDEs do, through a loopback listener that stands
// in for hoist's proxy: each connection is spliced to DialSSH.
func TestSSH_openSSHClient(t *testing.T) {
	if _, err := exec.LookPath("ssh"); err != nil {
		t.Skip("SKIP: no OpenSSH client")
	}
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	key, _ := ssh.NewSignerFromKey(priv)
	line := strings.TrimSpace(string(ssh.MarshalAuthorizedKey(key.PublicKey())))
	c, _ := sshRunner(t, runner.Config{})
	wd := t.TempDir()
	if err := os.WriteFile(filepath.Join(wd, "result.txt"), []byte("trained\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	startJob(t, c, api.JobSpec{AuthorizedKeys: []string{line}, WorkingDir: wd})
	svc := echoService(t)

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var proxies sync.WaitGroup
	t.Cleanup(func() { ln.Close(); proxies.Wait() })
	proxies.Go(func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			proxies.Go(func() {
				defer conn.Close()
				up, _, err := c.DialSSH(context.Background(), "")
				if err != nil {
					return
				}
				defer up.Close()
				go func() { _, _ = io.Copy(up, conn); up.Close() }()
				_, _ = io.Copy(conn, up)
			})
		}
	})
	up, hostKey, err := c.DialSSH(ctx(t), "")
	if err != nil {
		t.Fatal(err)
	}
	up.Close()
	port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	dir := t.TempDir()
	block, err := ssh.MarshalPrivateKey(priv, "")
	if err != nil {
		t.Fatal(err)
	}
	keyFile, known := filepath.Join(dir, "id_ed25519"), filepath.Join(dir, "known_hosts")
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(block), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(known, []byte("[127.0.0.1]:"+port+" "+hostKey+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	opts := []string{"-F", "/dev/null", "-o", "BatchMode=yes", "-o", "IdentitiesOnly=yes", "-i", keyFile,
		"-o", "UserKnownHostsFile=" + known, "-o", "StrictHostKeyChecking=yes", "-o", "LogLevel=ERROR"}
	// run runs args under sh, which reports their exit status: the
	// runner's reaper in this process may reap sh before os/exec does.
	run := func(t *testing.T, stdin string, args ...string) (string, int) {
		t.Helper()
		cmd := exec.CommandContext(ctx(t), "sh", append([]string{"-c", `"$@"; echo "exit=$?"`, "sh"}, args...)...)
		cmd.Env = append(os.Environ(), "HOIST_FROM_CLIENT=sent")
		cmd.Stdin = strings.NewReader(stdin)
		var out, errs bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errs
		if err := cmd.Run(); err != nil && !errors.Is(err, syscall.ECHILD) {
			t.Fatalf("%s: %v", args[0], err)
		}
		if errs.Len() > 0 {
			t.Logf("%s stderr: %s", args[0], errs.String())
		}
		o := out.String()
		i := strings.LastIndex(o, "exit=")
		if i < 0 {
			t.Fatalf("%s: no exit status in %q", args[0], o)
		}
		code, _ := strconv.Atoi(strings.TrimSpace(o[i+len("exit="):]))
		return o[:i], code
	}
	sshArgs := func(extra ...string) []string {
		return append(append(append([]string{"ssh"}, opts...), "-p", port), extra...)
	}
	tests := []struct {
		name  string
		args  []string
		stdin string
		want  string
		code  int
	}{
		{"command with exit status and SendEnv", sshArgs("-o", "SendEnv=HOIST_FROM_CLIENT", "root@127.0.0.1", `echo "$HOIST_FROM_CLIENT in $PWD"; exit 3`), "",
			"sent in " + wd + "\n", 3},
		{"terminal", sshArgs("-tt", "root@127.0.0.1"), "echo pty-$((40+2)); exit\n", "pty-42\r\n", 0},
		{"stdio forwarding (direct-tcpip)", sshArgs("-W", svc, "root@127.0.0.1"), "hello\n", "echo: hello\n", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, code := run(t, tt.stdin, tt.args...)
			if code != tt.code || !strings.Contains(out, tt.want) {
				t.Errorf("output %q exit %d, want %q exit %d", out, code, tt.want, tt.code)
			}
		})
	}
	if _, err := os.Stat("/usr/lib/openssh/sftp-server"); err == nil {
		t.Run("scp through the image's sftp-server", func(t *testing.T) {
			dst := filepath.Join(t.TempDir(), "result.txt")
			args := append(append([]string{"scp"}, opts...), "-P", port, "root@127.0.0.1:result.txt", dst)
			if _, code := run(t, "", args...); code != 0 {
				t.Fatalf("scp exit %d", code)
			}
			if b, err := os.ReadFile(dst); err != nil || string(b) != "trained\n" {
				t.Errorf("copied %q, %v", b, err)
			}
		})
	}
}

// echoService listens on loopback and answers each line with "echo: "
// and the line; it returns its address.
func echoService(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var conns sync.WaitGroup
	t.Cleanup(func() { ln.Close(); conns.Wait() })
	conns.Go(func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			conns.Go(func() {
				defer conn.Close()
				l, _ := bufio.NewReader(conn).ReadString('\n')
				_, _ = io.WriteString(conn, "echo: "+l)
			})
		}
	})
	return ln.Addr().String()
}

// Not parallel: it sets the keepalive of the runners made meanwhile.
func TestSSH_unresponsiveClientIsDropped(t *testing.T) {
	runner.SetSSHKeepalive(t, 20*time.Millisecond, 3)
	key, line := userKey(t)
	c, _ := sshRunner(t, runner.Config{})
	startJob(t, c, api.JobSpec{AuthorizedKeys: []string{line}, WorkingDir: t.TempDir()})
	live := mustDial(t, c, key, "")
	// A client that never answers: its global requests are not serviced.
	conn, hostKey, err := c.DialSSH(ctx(t), "")
	if err != nil {
		t.Fatal(err)
	}
	pub, _, _, _, _ := ssh.ParseAuthorizedKey([]byte(hostKey))
	dead, _, _, err := ssh.NewClientConn(conn, "runner", &ssh.ClientConfig{User: "root", Auth: []ssh.AuthMethod{ssh.PublicKeys(key)},
		HostKeyCallback: ssh.FixedHostKey(pub), HostKeyAlgorithms: []string{pub.Type()}})
	if err != nil {
		t.Fatal(err)
	}
	defer dead.Close()
	ended := make(chan error, 1)
	go func() { ended <- dead.Wait() }()
	select {
	case err := <-ended:
		if err == nil {
			t.Error("the unresponsive client's connection ended without an error")
		}
	case <-ctx(t).Done():
		t.Fatal("the runner kept the unresponsive client's connection")
	}
	waitActivity(t, c, 1)
	if out, _, err := output(t, live, "echo alive", nil); err != nil || out != "alive\n" {
		t.Errorf("the answering client after the other was dropped: %q, %v", out, err)
	}
}
