package runner

import (
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/crypto/ssh"

	"hoist/agents/api"
)

// sftpServers are where images keep OpenSSH's sftp-server; the sftp
// subsystem (sftp, scp of OpenSSH 9+) runs the first one present and is
// refused in an image without one.
var sftpServers = []string{
	"/usr/lib/openssh/sftp-server",     // Debian, Ubuntu
	"/usr/libexec/openssh/sftp-server", // RHEL, Fedora
	"/usr/lib/ssh/sftp-server",         // Arch, Alpine
	"/usr/libexec/sftp-server",
}

// sshSignals are the signal names of RFC 4254 section 6.10.
var sshSignals = map[string]syscall.Signal{
	"ABRT": syscall.SIGABRT, "ALRM": syscall.SIGALRM, "FPE": syscall.SIGFPE, "HUP": syscall.SIGHUP,
	"ILL": syscall.SIGILL, "INT": syscall.SIGINT, "KILL": syscall.SIGKILL, "PIPE": syscall.SIGPIPE,
	"QUIT": syscall.SIGQUIT, "SEGV": syscall.SIGSEGV, "TERM": syscall.SIGTERM, "USR1": syscall.SIGUSR1,
	"USR2": syscall.SIGUSR2,
}

// sshSignalName returns the RFC 4254 name of sig.
func sshSignalName(sig syscall.Signal) (string, bool) {
	for name, s := range sshSignals {
		if s == sig {
			return name, true
		}
	}
	return "", false
}

// Request payloads of session channels (RFC 4254 section 6).
type (
	envRequest struct {
		Name, Value string
	}
	ptyRequest struct {
		Term                      string
		Cols, Rows, Width, Height uint32
		Modes                     string
	}
	windowChangeRequest struct {
		Cols, Rows, Width, Height uint32
	}
	execRequest struct {
		Command string
	}
	subsystemRequest struct {
		Name string
	}
	signalRequest struct {
		Signal string
	}
	exitStatus struct {
		Status uint32
	}
	exitSignal struct {
		Signal     string
		CoreDumped bool
		Error      string
		Lang       string
	}
)

// session is one session channel: at most one process, run as the job's
// user in the job's environment and working directory, in a session of its
// own (setsid), on a pseudo-terminal when the client asked for one.
type session struct {
	srv  *sshServer
	ch   ssh.Channel
	env  map[string]string // set by env requests
	term string            // TERM of the pty-req

	master, slave *os.File // the pty, after pty-req

	started bool
	pid     int
	exited  <-chan syscall.WaitStatus
	outputs []*os.File     // what the output copies read (pipes or the pty master)
	out     sync.WaitGroup // the output copies
	in      sync.WaitGroup // the input copy
	hangup  chan struct{}  // closed when the channel is gone
	ended   chan struct{}  // closed when the process's end was handled
}

// session serves a session channel until it is closed.
func (s *sshServer) session(nch ssh.NewChannel) {
	ch, reqs, err := nch.Accept()
	if err != nil {
		return
	}
	ss := &session{srv: s, ch: ch, env: map[string]string{}, hangup: make(chan struct{}), ended: make(chan struct{})}
	for req := range reqs {
		ok, then := ss.handle(req)
		if req.WantReply {
			_ = req.Reply(ok, nil)
		}
		if then != nil {
			then()
		}
	}
	close(ss.hangup)
	if ss.started {
		<-ss.ended
		ss.in.Wait()
		return
	}
	if ss.master != nil {
		ss.master.Close()
		ss.slave.Close()
	}
	ch.Close()
}

// handle answers one channel request; then, if not nil, runs after the
// reply has been sent.
func (ss *session) handle(req *ssh.Request) (ok bool, then func()) {
	switch req.Type {
	case "env":
		var p envRequest
		if ssh.Unmarshal(req.Payload, &p) != nil || ss.started || p.Name == "" || strings.ContainsAny(p.Name, "=\x00") || strings.Contains(p.Value, "\x00") {
			return false, nil
		}
		ss.env[p.Name] = p.Value
		return true, nil
	case "pty-req":
		var p ptyRequest
		if ssh.Unmarshal(req.Payload, &p) != nil || ss.started || ss.master != nil {
			return false, nil
		}
		master, slave, err := openPTY()
		if err != nil {
			ss.srv.r.log.Warn("ssh_pty_failed", "err", err)
			return false, nil
		}
		_ = setWinsize(master, p.Cols, p.Rows, p.Width, p.Height)
		if err := setModes(slave, []byte(p.Modes)); err != nil {
			ss.srv.r.log.Warn("ssh_pty_modes_failed", "err", err)
		}
		ss.master, ss.slave, ss.term = master, slave, p.Term
		return true, nil
	case "window-change":
		var p windowChangeRequest
		if ssh.Unmarshal(req.Payload, &p) != nil || ss.master == nil {
			return false, nil
		}
		return setWinsize(ss.master, p.Cols, p.Rows, p.Width, p.Height) == nil, nil
	case "shell", "exec", "subsystem":
		if ss.started {
			return false, nil
		}
		argv, err := ss.command(req)
		if err == nil {
			err = ss.start(req.Type, argv)
		}
		if err != nil {
			ss.srv.r.log.Info("ssh_session_refused", "request", req.Type, "err", err)
			fmt.Fprintf(ss.ch.Stderr(), "hoist-runner: %v\r\n", err)
			return false, nil
		}
		return true, ss.wait
	case "signal":
		var p signalRequest
		if ssh.Unmarshal(req.Payload, &p) != nil || !ss.started {
			return false, nil
		}
		sig, known := sshSignals[p.Signal]
		if !known {
			return false, nil
		}
		return syscall.Kill(-ss.pid, sig) == nil, nil
	default:
		// x11-req, auth-agent-req@openssh.com, keepalives and the rest.
		return false, nil
	}
}

// command returns what a shell, exec or subsystem request runs: the job's
// shell, interactive or with -c; or the sftp server.
func (ss *session) command(req *ssh.Request) ([]string, error) {
	shell := ss.srv.r.sessionShell()
	switch req.Type {
	case "shell":
		return []string{shell}, nil
	case "exec":
		var p execRequest
		if err := ssh.Unmarshal(req.Payload, &p); err != nil {
			return nil, fmt.Errorf("malformed exec request: %w", err)
		}
		return []string{shell, "-c", p.Command}, nil
	}
	var p subsystemRequest
	if err := ssh.Unmarshal(req.Payload, &p); err != nil {
		return nil, fmt.Errorf("malformed subsystem request: %w", err)
	}
	if p.Name != "sftp" {
		return nil, fmt.Errorf("subsystem %q is not supported", p.Name)
	}
	for _, path := range sftpServers {
		if fi, err := os.Stat(path); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return []string{path}, nil
		}
	}
	return nil, errors.New("subsystem sftp: the image has no sftp-server (install openssh-sftp-server)")
}

// start starts argv for the session and the copies between it and the
// channel.
func (ss *session) start(kind string, argv []string) error {
	r := ss.srv.r
	base, dir, err := r.sessionBase()
	if err != nil {
		return err
	}
	// What sshd sets for the user (see sshd(8), ENVIRONMENT) unless the
	// job's environment has it; then the client's env requests; then the
	// terminal's.
	set := map[string]string{}
	if u, ok := passwdEntry(os.Getuid()); ok {
		for k, v := range map[string]string{"USER": u.name, "LOGNAME": u.name, "SHELL": r.sessionShell()} {
			if envValue(base, k) == "" {
				set[k] = v
			}
		}
	}
	maps.Copy(set, ss.env)
	if ss.master != nil {
		set["SSH_TTY"] = ss.slave.Name()
		if ss.term != "" {
			set["TERM"] = ss.term
		}
	}
	env := mergeEnv(base, set)
	path, err := lookPathIn(argv[0], envValue(env, "PATH"))
	if err != nil {
		return fmt.Errorf("find %s: %w", argv[0], err)
	}
	attr := &os.ProcAttr{Dir: dir, Env: env}
	var (
		closeAfterStart []*os.File
		stdinW          *os.File
		stdoutR         *os.File
		stderrR         *os.File
	)
	if ss.master != nil {
		attr.Files = []*os.File{ss.slave, ss.slave, ss.slave}
		attr.Sys = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
		closeAfterStart = []*os.File{ss.slave}
	} else {
		files, err := pipes()
		if err != nil {
			return err
		}
		stdinW, stdoutR, stderrR = files[0], files[2], files[4]
		attr.Files = []*os.File{files[1], files[3], files[5]}
		attr.Sys = &syscall.SysProcAttr{Setsid: true}
		closeAfterStart = attr.Files
	}
	proc, exited, err := r.reaper.start(path, argv, attr)
	for _, f := range closeAfterStart {
		f.Close()
	}
	if err != nil {
		for _, f := range []*os.File{stdinW, stdoutR, stderrR, ss.master} {
			if f != nil {
				f.Close()
			}
		}
		ss.master = nil
		return fmt.Errorf("start %s: %w", argv[0], err)
	}
	ss.pid, ss.exited, ss.started = proc.Pid, exited, true
	_ = proc.Release() // the reaper waits for it
	if !ss.srv.trackSession(ss.pid) {
		killSession(ss.pid)
	}
	r.log.Info("ssh_session_started", "request", kind, "pid", ss.pid, "pty", ss.master != nil)
	if ss.master != nil {
		ss.outputs = []*os.File{ss.master}
		ss.out.Go(func() { _, _ = io.Copy(ss.ch, ss.master) })
		ss.in.Go(func() { _, _ = io.Copy(ss.master, ss.ch) })
		return nil
	}
	ss.outputs = []*os.File{stdoutR, stderrR}
	ss.out.Go(func() { _, _ = io.Copy(ss.ch, stdoutR) })
	ss.out.Go(func() { _, _ = io.Copy(ss.ch.Stderr(), stderrR) })
	ss.in.Go(func() {
		_, _ = io.Copy(stdinW, ss.ch)
		stdinW.Close()
	})
	return nil
}

// pipes returns three pipes as stdin (write, read), stdout (read, write)
// and stderr (read, write): the parent's end first.
func pipes() ([]*os.File, error) {
	var files []*os.File
	for i := range 3 {
		r, w, err := os.Pipe()
		if err != nil {
			for _, f := range files {
				f.Close()
			}
			return nil, fmt.Errorf("pipe: %w", err)
		}
		if i == 0 {
			files = append(files, w, r)
		} else {
			files = append(files, r, w)
		}
	}
	return files, nil
}

// wait reports the process's end to the client: once its output is
// drained, its exit status or signal, then the channel's close. When the
// channel goes first, the process's session is hung up instead.
func (ss *session) wait() {
	go func() {
		defer close(ss.ended)
		var ws syscall.WaitStatus
		select {
		case ws = <-ss.exited:
		case <-ss.hangup:
			// The client left: hang up as a terminal does. What ignores
			// SIGHUP lives on until the job ends.
			_ = syscall.Kill(-ss.pid, syscall.SIGHUP)
			ss.closeOutputs()
			ss.out.Wait()
			return
		}
		drained := make(chan struct{})
		go func() { ss.out.Wait(); close(drained) }()
		select {
		case <-drained:
		case <-ss.hangup:
			ss.closeOutputs()
			<-drained
		case <-time.After(drainAfterExit):
			// A process the session left behind holds the output open.
			ss.closeOutputs()
			<-drained
		}
		ss.closeOutputs()
		_ = ss.ch.CloseWrite()
		if name, ok := sshSignalName(ws.Signal()); ws.Signaled() && ok {
			_, _ = ss.ch.SendRequest("exit-signal", false, ssh.Marshal(exitSignal{Signal: name, CoreDumped: ws.CoreDump()}))
		} else {
			code := ws.ExitStatus()
			if ws.Signaled() {
				code = 128 + int(ws.Signal())
			}
			_, _ = ss.ch.SendRequest("exit-status", false, ssh.Marshal(exitStatus{Status: uint32(code)}))
		}
		ss.srv.r.log.Info("ssh_session_ended", "pid", ss.pid, "exit_code", ws.ExitStatus(), "signaled", ws.Signaled())
		ss.ch.Close()
	}()
}

func (ss *session) closeOutputs() {
	for _, f := range ss.outputs {
		f.Close()
	}
}

// sessionBase returns the environment and working directory of an SSH
// session: the job's, while it runs.
func (r *Runner) sessionBase() (env []string, dir string, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.state.State != api.JobRunning {
		return nil, "", fmt.Errorf("the job is %s, not running", r.state.State)
	}
	return r.env(), r.workDir, nil
}

// sessionShell returns the shell of SSH sessions: the job's shell when its
// spec names one, else the user's login shell, as sshd runs it, else
// /bin/sh.
func (r *Runner) sessionShell() string {
	r.mu.Lock()
	shell := ""
	if r.spec != nil {
		shell = r.spec.Shell
	}
	r.mu.Unlock()
	if shell != "" {
		return shell
	}
	if u, ok := passwdEntry(os.Getuid()); ok && u.shell != "" {
		if base := filepath.Base(u.shell); base != "nologin" && base != "false" {
			if fi, err := os.Stat(u.shell); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
				return u.shell
			}
		}
	}
	return "/bin/sh"
}

// passwdUser is a user's entry in /etc/passwd.
type passwdUser struct {
	name, shell string
}

// passwdEntry returns uid's entry in the container's /etc/passwd.
func passwdEntry(uid int) (passwdUser, bool) {
	b, err := os.ReadFile("/etc/passwd")
	if err != nil {
		return passwdUser{}, false
	}
	want := strconv.Itoa(uid)
	for line := range strings.SplitSeq(string(b), "\n") {
		// name:password:uid:gid:gecos:home:shell (see passwd(5)).
		f := strings.Split(line, ":")
		if len(f) == 7 && f[2] == want {
			return passwdUser{name: f[0], shell: f[6]}, true
		}
	}
	return passwdUser{}, false
}

// mergeEnv returns env (KEY=VALUE lines) with set's variables replacing or
// added, sorted.
func mergeEnv(env []string, set map[string]string) []string {
	m := make(map[string]string, len(env)+len(set))
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		m[k] = v
	}
	for k, v := range set {
		m[k] = v
	}
	out := make([]string, 0, len(m))
	for k, v := range m {
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return out
}

// envValue returns the value of key in env (KEY=VALUE lines).
func envValue(env []string, key string) string {
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, key+"="); ok {
			return v
		}
	}
	return ""
}
