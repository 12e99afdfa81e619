package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/crypto/ssh"

	"hoist/schema"
	"hoist/web"
	"hoist/web/client"
)

// attachKeepalive is how often `hoist attach` checks that its SSH
// connection is alive.
const attachKeepalive = 15 * time.Second

// attachWaitEvery is how often `hoist attach` asks again while the run's
// job is not running yet.
const attachWaitEvery = time.Second

// forwardedPort is one of the run's `ports:` forwarded to this machine.
type forwardedPort struct {
	// ContainerPort is the port in the job.
	ContainerPort int `json:"container_port"`
	// LocalPort is where it answers here, on 127.0.0.1.
	LocalPort int `json:"local_port"`
	// Wanted is the local port the spec asked for (or the container port
	// for `*:N`), when LocalPort differs because it was in use here.
	Wanted int `json:"wanted_port,omitempty"`

	ln net.Listener
}

// attachment is what `hoist attach` prints once it is ready.
type attachment struct {
	Run string `json:"run"`
	// Ports are the run's forwarded ports.
	Ports []forwardedPort `json:"ports"`
	// SSHHost is the ~/.ssh/config host for `ssh RUN` and IDEs ("" with
	// --no-ssh-config).
	SSHHost string `json:"ssh_host,omitempty"`
	// SSHConfig is the file the host was written to.
	SSHConfig string `json:"ssh_config,omitempty"`
	// IDEURL is the dev environment's IDE link, when it has an `ide`.
	IDEURL string `json:"ide_url,omitempty"`
}

func newAttachCmd() *cobra.Command {
	var o clientOptions
	var output, job, identity, sshConfig string
	var noSSHConfig bool
	cmd := &cobra.Command{
		Use:   "attach RUN",
		Short: "Forward a run's ports to localhost and set up `ssh RUN`, until interrupted",
		Long: `Attach to RUN's newest running job (--job picks another submission), as
dstack's attach does: wait until it runs, forward each of the run's ports:
to 127.0.0.1 (at the local port the spec gives, or the container port for
"*:N"; the next free port when that one is in use here), write a Host RUN
entry to ~/.ssh/config (--ssh-config FILE; --no-ssh-config skips it) so that
"ssh RUN" and IDEs reach the job, print the mapping and the dev
environment's IDE link, and stay attached until Ctrl-C or SIGTERM (the job
counts as attached meanwhile, see inactivity_duration). With -o json the
mapping is printed once as a JSON object when ready.

The ~/.ssh/config entry, between "# >>> hoist run RUN" and "# <<< hoist run
RUN" lines, is replaced on each attach; it connects through "hoist
ssh-proxy", which records the job's host key in
~/.config/hoist/ssh/known_hosts and keeps strict host key checking on.
It needs the server and token from the environment or the login config
(the server's URL is written into the entry, the token never).

` + sshHelp + "\n\n" + clientHelp + "\n\n" + exitHelp,
		Args: cobra.ExactArgs(1),
	}
	check := outputFlag(cmd, &output)
	o.addProjectFlags(cmd.Flags())
	cmd.Flags().StringVar(&job, "job", "", "the submission (id or number; default the newest running)")
	cmd.Flags().StringVarP(&identity, "identity", "i", "", "the SSH private key to use (default ~/.config/hoist/ssh/id_ed25519)")
	cmd.Flags().StringVar(&sshConfig, "ssh-config", "", "the OpenSSH config file to write the run's Host entry to (default ~/.ssh/config)")
	cmd.Flags().BoolVar(&noSSHConfig, "no-ssh-config", false, "do not write a Host entry for the run")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		c, err := o.connect(cmd, check)
		if err != nil {
			return err
		}
		name := args[0]
		ctx := cmd.Context()
		key, err := loadUserKey(identity)
		if err != nil {
			return err
		}
		sshc, err := dialWhenRunning(ctx, c, name, job, key, cmd.ErrOrStderr())
		if err != nil {
			if ctx.Err() != nil {
				return nil // interrupted while waiting
			}
			return fmt.Errorf("attach: %w", err)
		}
		defer sshc.Close()
		run, err := c.Run(ctx, name)
		if err != nil {
			return fmt.Errorf("attach: %w", err)
		}
		ports, err := runPorts(run, job)
		if err != nil {
			return fmt.Errorf("attach: %w", err)
		}
		a := attachment{Run: name, IDEURL: run.IDEURL}
		if a.Ports, err = listenPorts(ports); err != nil {
			return fmt.Errorf("attach: %w", err)
		}
		var wg sync.WaitGroup
		defer func() {
			for _, p := range a.Ports {
				p.ln.Close()
			}
			wg.Wait()
		}()
		for _, p := range a.Ports {
			wg.Add(1)
			go func() {
				defer wg.Done()
				forward(p.ln, sshc, p.ContainerPort)
			}()
		}
		if !noSSHConfig {
			if a.SSHConfig, err = writeRunSSHConfig(sshConfig, name, job, c.BaseURL, c.Project, key); err != nil {
				return fmt.Errorf("attach: %w", err)
			}
			a.SSHHost = name
		}
		if err := printAttachment(cmd.OutOrStdout(), output, a); err != nil {
			return err
		}
		if err := holdAttachment(ctx, sshc); err != nil {
			return fmt.Errorf("attach: %w", err)
		}
		return nil
	}
	return cmd
}

// dialWhenRunning connects to the run's job, waiting (and saying so once
// on w) while it is not running yet.
func dialWhenRunning(ctx context.Context, c *client.Client, run, job string, key userKey, w io.Writer) (*ssh.Client, error) {
	said := false
	for {
		sshc, err := dialJob(ctx, c, run, job, key)
		if !notRunningYet(err) {
			return sshc, err
		}
		if !said {
			fmt.Fprintf(w, "Waiting for %s to start running...\n", run)
			said = true
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(attachWaitEvery):
		}
	}
}

// holdAttachment keeps the SSH connection until ctx ends (nil) or the
// connection does (an error: the job ended or the server went away).
func holdAttachment(ctx context.Context, sshc *ssh.Client) error {
	closed := make(chan error, 1)
	go func() { closed <- sshc.Wait() }()
	t := time.NewTicker(attachKeepalive)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case err := <-closed:
			return fmt.Errorf("the connection to the job closed: %w", err)
		case <-t.C:
			if _, _, err := sshc.SendRequest("keepalive@openssh.com", true, nil); err != nil {
				return fmt.Errorf("the connection to the job closed: %w", err)
			}
		}
	}
}

// runPorts returns the `ports:` of a run's normalized spec (tasks and dev
// environments have them); for a task with groups, those of the group of
// the job attached to (the --job submission, else the first running job,
// as the server's SSH route picks it).
func runPorts(run web.Run, job string) ([]schema.PortMapping, error) {
	var spec struct {
		Ports  []schema.PortMapping `json:"ports"`
		Groups []schema.NodeGroup   `json:"groups"`
	}
	if len(run.Spec) == 0 {
		return nil, nil
	}
	if err := json.Unmarshal(run.Spec, &spec); err != nil {
		return nil, fmt.Errorf("read the ports of %s: %w", run.Name, err)
	}
	if len(spec.Groups) == 0 {
		return spec.Ports, nil
	}
	group := ""
	for _, j := range run.Jobs {
		if job != "" && (j.ID == job || j.SubmissionID == job || strconv.Itoa(j.SubmissionNum) == job) ||
			job == "" && j.Status == "running" {
			group = j.Group
			break
		}
	}
	for _, g := range spec.Groups {
		if g.Name == group {
			return g.Ports, nil
		}
	}
	return nil, nil
}

// listenPorts listens on 127.0.0.1 for each port: at its local port (the
// container port for `*:N`), or the next free one above it when that one
// is in use here, as dstack's attach does for ports without a local port
// (dstack refuses a busy explicit one; hoist's local backend has already
// published explicit ones on this machine's loopback, so it moves on too).
func listenPorts(ports []schema.PortMapping) ([]forwardedPort, error) {
	out := []forwardedPort{}
	taken := map[int]bool{}
	fail := func(err error) ([]forwardedPort, error) {
		for _, p := range out {
			p.ln.Close()
		}
		return nil, err
	}
	for _, pm := range ports {
		want := pm.ContainerPort
		if pm.LocalPort != nil {
			want = *pm.LocalPort
		}
		for port := want; ; port++ {
			if port > 65535 {
				return fail(fmt.Errorf("no free local port from %d for port %d", want, pm.ContainerPort))
			}
			if taken[port] {
				continue
			}
			ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
			if errors.Is(err, syscall.EADDRINUSE) {
				continue
			}
			if err != nil {
				return fail(fmt.Errorf("listen for port %d: %w", pm.ContainerPort, err))
			}
			fp := forwardedPort{ContainerPort: pm.ContainerPort, LocalPort: port, ln: ln}
			if port != want {
				fp.Wanted = want
			}
			taken[port] = true
			out = append(out, fp)
			break
		}
	}
	return out, nil
}

// forward accepts connections on ln until it is closed and connects each
// to port in the job (a direct-tcpip channel to localhost:port).
func forward(ln net.Listener, sshc *ssh.Client, port int) {
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		local, err := ln.Accept()
		if err != nil {
			return
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer local.Close()
			remote, err := sshc.Dial("tcp", net.JoinHostPort("localhost", strconv.Itoa(port)))
			if err != nil {
				return
			}
			defer remote.Close()
			done := make(chan struct{})
			go func() {
				_, _ = io.Copy(remote, local)
				if cw, ok := remote.(interface{ CloseWrite() error }); ok {
					_ = cw.CloseWrite()
				}
				close(done)
			}()
			_, _ = io.Copy(local, remote)
			if tc, ok := local.(*net.TCPConn); ok {
				_ = tc.CloseWrite()
			}
			<-done
		}()
	}
}

// printAttachment prints what attach set up: a JSON object with -o json,
// else lines for people.
func printAttachment(w io.Writer, output string, a attachment) error {
	if output == "json" {
		return json.NewEncoder(w).Encode(a)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Attached to %s.\n", a.Run)
	if len(a.Ports) > 0 {
		b.WriteString("Forwarded ports:\n")
		for _, p := range a.Ports {
			fmt.Fprintf(&b, "  %d -> http://127.0.0.1:%d", p.ContainerPort, p.LocalPort)
			if p.Wanted != 0 {
				fmt.Fprintf(&b, " (%d is in use here)", p.Wanted)
			}
			b.WriteString("\n")
		}
	}
	if a.SSHHost != "" {
		fmt.Fprintf(&b, "SSH: ssh %s (Host %s in %s)\n", a.SSHHost, a.SSHHost, a.SSHConfig)
	}
	if a.IDEURL != "" {
		fmt.Fprintf(&b, "IDE: %s\n", a.IDEURL)
	}
	b.WriteString("Press Ctrl-C to detach.\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// writeRunSSHConfig writes the Host entry of run into the OpenSSH config
// file at path (~/.ssh/config when empty), replacing the entry an earlier
// attach wrote, and returns the file's path. The entry's ProxyCommand names
// the server and, unless it is the default one, the project.
func writeRunSSHConfig(path, run, job, server, project string, key userKey) (string, error) {
	if path == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", err
		}
		path = filepath.Join(home, ".ssh", "config")
	}
	dir, err := sshDir()
	if err != nil {
		return "", err
	}
	exe, err := os.Executable()
	if err != nil {
		return "", err
	}
	if exe, err = filepath.Abs(exe); err != nil {
		return "", err
	}
	proxy := []string{exe, "ssh-proxy", run, "--server", server, "--identity", key.path}
	if project != "" {
		proxy = append(proxy, "--project", project)
	}
	if job != "" {
		proxy = append(proxy, "--job", job)
	}
	block := runSSHConfigBlock(run, key.path, filepath.Join(dir, "known_hosts"), proxy)
	old, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("read %s: %w", path, err)
	}
	mode := os.FileMode(0o600)
	if fi, err := os.Stat(path); err == nil {
		mode = fi.Mode().Perm()
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return "", err
	}
	if err := writeFileAtomic(path, []byte(replaceRunBlock(string(old), run, block)), mode); err != nil {
		return "", fmt.Errorf("write %s: %w", path, err)
	}
	return path, nil
}

func runBlockMarkers(run string) (begin, end string) {
	return "# >>> hoist run " + run + " >>>", "# <<< hoist run " + run + " <<<"
}

// runSSHConfigBlock is run's Host entry: OpenSSH reaches the job through
// `hoist ssh-proxy` (proxy, its argv) with the user's key, checking the
// host key ssh-proxy records in knownHosts.
func runSSHConfigBlock(run, identity, knownHosts string, proxy []string) string {
	begin, end := runBlockMarkers(run)
	quoted := make([]string, len(proxy))
	for i, a := range proxy {
		quoted[i] = shellQuote(a)
	}
	lines := []string{
		begin,
		"Host " + run,
		"  HostKeyAlias " + run,
		"  User root",
		"  IdentityFile " + sshConfigArg(identity),
		"  IdentitiesOnly yes",
		"  ProxyCommand " + strings.ReplaceAll(strings.Join(quoted, " "), "%", "%%"),
		"  UserKnownHostsFile " + sshConfigArg(knownHosts),
		"  StrictHostKeyChecking yes",
		// What follows the entry applies to every host again, as the
		// file's options before its first Host did.
		"Host *",
		end,
	}
	return strings.Join(lines, "\n") + "\n"
}

// replaceRunBlock returns config with run's block (between its markers)
// replaced by block, or block put first when it had none.
func replaceRunBlock(config, run, block string) string {
	begin, end := runBlockMarkers(run)
	lines := strings.SplitAfter(config, "\n")
	var out strings.Builder
	in, replaced := false, false
	for _, l := range lines {
		t := strings.TrimSpace(l)
		switch {
		case !in && t == begin:
			in = true
		case in && t == end:
			in = false
			if !replaced {
				out.WriteString(block)
				replaced = true
			}
		case !in:
			out.WriteString(l)
		}
	}
	if in {
		// A begin marker without its end: keep the file as it was.
		out.Reset()
		out.WriteString(config)
	}
	if !replaced {
		// First: OpenSSH takes each option's first value, so the entry must
		// come before a user's `Host *`.
		rest := out.String()
		out.Reset()
		out.WriteString(block)
		if rest != "" {
			out.WriteString("\n")
			out.WriteString(rest)
		}
	}
	return out.String()
}

// sshConfigArg quotes a path for ssh_config: double quotes when it has
// spaces, and % doubled (OpenSSH expands %-tokens in these paths).
func sshConfigArg(p string) string {
	p = strings.ReplaceAll(p, "%", "%%")
	if strings.ContainsAny(p, " \t") {
		return `"` + p + `"`
	}
	return p
}

// shellQuote quotes s for /bin/sh (OpenSSH runs ProxyCommand with the
// user's shell).
func shellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./:=@+,", r))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
