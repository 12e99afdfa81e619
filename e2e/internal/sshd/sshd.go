package sshd

import (
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Path is where Debian's openssh-server installs sshd.
const Path = "/usr/sbin/sshd"

// Config is what an sshd_config says.
type Config struct {
	// IP and Port are the one address sshd listens on.
	IP   string
	Port int
	// HostKey is the private host key file (mode 0600).
	HostKey string
	// AuthorizedKeys is the one authorized_keys file, for every user.
	AuthorizedKeys string
	// PidFile is where sshd writes its PID.
	PidFile string
	// AllowUsers, when set, are the only users that may log in.
	AllowUsers []string
	// SetEnv are environment variables set in every session sshd starts.
	SetEnv map[string]string
}

// Addr returns ip:port.
func (c Config) Addr() string { return net.JoinHostPort(c.IP, strconv.Itoa(c.Port)) }

// Write writes the sshd_config for c to path (a `%` in the authorized keys
// path is escaped: sshd expands %-tokens there). Only public-key
// authentication is allowed (root too, as with PermitRootLogin
// prohibit-password).
func (c Config) Write(path string) error {
	var b strings.Builder
	fmt.Fprintf(&b, `Port %d
ListenAddress %s
HostKey %s
AuthorizedKeysFile %s
PidFile %s
UsePAM no
PasswordAuthentication no
KbdInteractiveAuthentication no
PubkeyAuthentication yes
PermitRootLogin prohibit-password
StrictModes no
AllowTcpForwarding yes
ClientAliveInterval 0
LogLevel INFO
`, c.Port, c.IP, c.HostKey, strings.ReplaceAll(c.AuthorizedKeys, "%", "%%"), c.PidFile)
	if len(c.AllowUsers) > 0 {
		fmt.Fprintf(&b, "AllowUsers %s\n", strings.Join(c.AllowUsers, " "))
	}
	// sshd uses the first SetEnv line only: every variable goes on it.
	if len(c.SetEnv) > 0 {
		b.WriteString("SetEnv")
		for _, k := range slices.Sorted(maps.Keys(c.SetEnv)) {
			fmt.Fprintf(&b, " %s=%q", k, c.SetEnv[k])
		}
		b.WriteString("\n")
	}
	return os.WriteFile(path, []byte(b.String()), 0o600)
}

// Check checks the sshd_config in path, and the files it names, with
// `sshd -t`.
func Check(path string) error {
	if err := privsepDir(); err != nil {
		return err
	}
	if out, err := exec.Command(Path, "-t", "-f", path).CombinedOutput(); err != nil {
		return fmt.Errorf("sshd -t -f %s: %w: %s", path, err, out)
	}
	return nil
}

// A Process is a running `sshd -D -e`.
type Process struct {
	cmd  *exec.Cmd
	done chan struct{}
}

// privsepDir makes, as root, sshd's privilege separation directory.
func privsepDir() error {
	if os.Geteuid() != 0 {
		return nil
	}
	return os.MkdirAll("/run/sshd", 0o755)
}

// Start starts `sshd -D -e -f config` in its own process group, writing its
// log to stderr. The listener gets SIGKILL when the process that started it
// dies (PR_SET_PDEATHSIG), so that a test or simulator that dies without
// cleaning up leaves no sshd listening.
func Start(config string, stderr io.Writer) (*Process, error) {
	return StartInNetns("", config, stderr)
}

// StartInNetns is Start in the network namespace bound at netns (a file
// such as /run/netns/NAME; "" is this process's own): nsenter(1) joins it
// and execs sshd, which keeps nsenter's PID. Only the network namespace
// changes; sshd shares this process's mounts and PID namespace.
func StartInNetns(netns, config string, stderr io.Writer) (*Process, error) {
	if err := privsepDir(); err != nil {
		return nil, err
	}
	argv := []string{Path, "-D", "-e", "-f", config}
	if netns != "" {
		argv = append([]string{"nsenter", "--net=" + netns, "--"}, argv...)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stderr = stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &Process{cmd: cmd, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(p.done) }()
	return p, nil
}

// PID returns the listener's process id.
func (p *Process) PID() int { return p.cmd.Process.Pid }

// Done is closed once the listener has exited.
func (p *Process) Done() <-chan struct{} { return p.done }

// ErrExited says sshd exited before it accepted a connection.
var ErrExited = errors.New("sshd exited")

// WaitListening waits until addr accepts TCP connections, for at most
// timeout; ErrExited when sshd exits first.
func (p *Process) WaitListening(addr string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			return nil
		}
		select {
		case <-p.done:
			return fmt.Errorf("%s: %w", addr, ErrExited)
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("sshd on %s did not come up: %w", addr, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Kill stops the listener, its process group and every sshd process
// descending from it (the per-connection processes, which sshd puts in
// sessions of their own), so that established connections drop too; it
// waits until they have exited (see KillTree), for at most 10 s. Killing an
// exited sshd does nothing.
func (p *Process) Kill() {
	select {
	case <-p.done:
		return
	default:
	}
	_ = KillTree(p.cmd.Process.Pid, func(comm string) bool { return comm == "sshd" || comm == "sshd-session" }, 10*time.Second)
	<-p.done
}

// KillTree sends SIGKILL to process pid (an sshd listener, which Start puts
// in a process group of its own), to its process group and to the processes
// descending from it whose command name keep accepts (every one when keep
// is nil), then waits until none of them is left, for at most timeout.
// Until then the listener's address may still be bound: a per-connection
// process the listener has just forked holds the listening socket until it
// closes it, which it does before leaving the listener's process group
// (OpenSSH sshd.c: server_accept_loop calls close_listen_socks in the
// child, main calls setsid after), and a process killed has not exited yet.
func KillTree(pid int, keep func(comm string) bool, timeout time.Duration) error {
	kids := Descendants(pid, keep)
	_ = syscall.Kill(-pid, syscall.SIGKILL)
	_ = syscall.Kill(pid, syscall.SIGKILL)
	for _, c := range kids {
		_ = syscall.Kill(c, syscall.SIGKILL)
	}
	deadline := time.Now().Add(timeout)
	for {
		left := groupMembers(pid)
		for _, c := range append([]int{pid}, kids...) {
			if alive(c) && !slices.Contains(left, c) {
				left = append(left, c)
			}
		}
		if len(left) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("sshd %d: processes %v still there %s after SIGKILL", pid, left, timeout)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// alive says whether process pid exists and is not a zombie (a zombie has
// closed its descriptors: what it listened on is free).
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	st := string(b)
	i := strings.LastIndexByte(st, ')')
	return i < 0 || !strings.HasPrefix(st[i+1:], " Z")
}

// procStat is what /proc/PID/stat says of one process.
type procStat struct {
	pid, ppid, pgrp int
	zombie          bool
}

// procStats reads /proc/PID/stat of every process (proc(5): "pid (comm)
// state ppid pgrp ..."; comm may hold spaces and parentheses, so the fields
// are read after its last ')').
func procStats() []procStat {
	var out []procStat
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		st := string(b)
		i := strings.LastIndexByte(st, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(st[i+1:])
		if len(f) < 3 {
			continue
		}
		ppid, _ := strconv.Atoi(f[1])
		pgrp, _ := strconv.Atoi(f[2])
		out = append(out, procStat{pid: p, ppid: ppid, pgrp: pgrp, zombie: f[0] == "Z"})
	}
	return out
}

// groupMembers lists the live processes of process group pgid.
func groupMembers(pgid int) []int {
	var out []int
	for _, ps := range procStats() {
		if !ps.zombie && ps.pgrp == pgid {
			out = append(out, ps.pid)
		}
	}
	return out
}

// Descendants lists the processes descending from pid whose command name
// (/proc/PID/comm) keep accepts (every one when keep is nil); the walk goes
// on below processes keep refuses.
func Descendants(pid int, keep func(comm string) bool) []int {
	parent := map[int][]int{}
	for _, ps := range procStats() {
		parent[ps.ppid] = append(parent[ps.ppid], ps.pid)
	}
	var out []int
	var walk func(int)
	walk = func(p int) {
		for _, c := range parent[p] {
			if keep == nil || keep(Comm(c)) {
				out = append(out, c)
			}
			walk(c)
		}
	}
	walk(pid)
	return out
}

// Comm returns the command name of process pid ("" when it is gone).
func Comm(pid int) string {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
	return strings.TrimSpace(string(b))
}
