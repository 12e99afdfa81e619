package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/crypto/ssh"
	"golang.org/x/term"

	"hoist/web/client"
)

// sshHandshakeTimeout bounds the SSH handshake with a job, once the server
// connected to it.
const sshHandshakeTimeout = 30 * time.Second

// sshHelp says where `hoist ssh` and `hoist attach` get the user's key.
const sshHelp = `The connection goes through the server (GET /api/v1/runs/{name}/ssh),
which reaches the job through the connection it holds to the job's
instance. The job accepts the user's key for that connection: --identity,
else ~/.config/hoist/ssh/id_ed25519, generated on first use. The job's host
key is the one the server returns, pinned for the connection.`

// jobHostKey parses the host key the server returned and the algorithms
// to offer for it (the key's own type; RSA keys are offered with SHA-2
// signatures first, as OpenSSH does).
func jobHostKey(line string) (ssh.PublicKey, []string, error) {
	k, _, _, _, err := ssh.ParseAuthorizedKey([]byte(line))
	if err != nil {
		return nil, nil, fmt.Errorf("the server returned no valid host key for the job (%q): %w", line, err)
	}
	if k.Type() == ssh.KeyAlgoRSA {
		return k, []string{ssh.KeyAlgoRSASHA512, ssh.KeyAlgoRSASHA256, ssh.KeyAlgoRSA}, nil
	}
	return k, []string{k.Type()}, nil
}

// dialJob opens an SSH client connection to a job of run through the
// server (client.DialSSH), authenticated by key, with the host key the
// server returned pinned. job "" is the newest running job.
func dialJob(ctx context.Context, c *client.Client, run, job string, key userKey) (*ssh.Client, error) {
	conn, hostKey, err := c.DialSSH(ctx, run, job, key.authorizedKey())
	if err != nil {
		return nil, err
	}
	hk, algs, err := jobHostKey(hostKey)
	if err != nil {
		conn.Close()
		return nil, err
	}
	// The upgraded connection has no deadlines: closing it ends a
	// handshake that hangs.
	hctx, cancel := context.WithTimeout(ctx, sshHandshakeTimeout)
	defer cancel()
	stop := context.AfterFunc(hctx, func() { conn.Close() })
	sc, chans, reqs, err := ssh.NewClientConn(conn, run, &ssh.ClientConfig{
		User: "root", Auth: []ssh.AuthMethod{ssh.PublicKeys(key.signer)},
		HostKeyCallback: ssh.FixedHostKey(hk), HostKeyAlgorithms: algs,
	})
	if !stop() {
		if sc != nil {
			sc.Close()
		}
		return nil, fmt.Errorf("ssh into %s: %w", run, errors.Join(hctx.Err(), err))
	}
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("ssh into %s: %w", run, err)
	}
	return ssh.NewClient(sc, chans, reqs), nil
}

// notRunningYet reports whether err is the server's 409: the job has not
// started running.
func notRunningYet(err error) bool {
	var ce *client.Error
	return errors.As(err, &ce) && ce.Status == 409
}

func newSSHCmd() *cobra.Command {
	var o clientOptions
	var job, identity string
	cmd := &cobra.Command{
		Use:   "ssh RUN [-- COMMAND...]",
		Short: "Open a shell in a run's job, or run a command there",
		Long: `Open a shell in RUN's newest running job (--job picks another submission:
its id or number), or with COMMAND run it there: its output streams to
stdout and stderr and hoist exits with its exit status. Without COMMAND the
shell gets a terminal when stdin is one (raw mode, window size followed),
plain pipes otherwise. The shell and the command run as the job's user in
its environment and working directory.

` + sshHelp + "\n\n" + clientHelp + "\n\n" + exitHelp + `
With COMMAND, the exit code is the command's.`,
		Args: cobra.MinimumNArgs(1),
	}
	o.addProjectFlags(cmd.Flags())
	cmd.Flags().StringVar(&job, "job", "", "the submission (id or number; default the newest running)")
	cmd.Flags().StringVarP(&identity, "identity", "i", "", "the SSH private key to use (default ~/.config/hoist/ssh/id_ed25519)")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		run, command := args[0], args[1:]
		if d := cmd.ArgsLenAtDash(); d > 1 || (d < 0 && len(args) > 1) {
			return errors.New("ssh: give the command after --: hoist ssh RUN -- COMMAND")
		}
		c, err := o.connect(cmd)
		if err != nil {
			return err
		}
		key, err := loadUserKey(identity)
		if err != nil {
			return err
		}
		sshc, err := dialJob(cmd.Context(), c, run, job, key)
		if notRunningYet(err) {
			return fmt.Errorf("ssh: run %s is not running yet", run)
		}
		if err != nil {
			return fmt.Errorf("ssh: %w", err)
		}
		defer sshc.Close()
		return runSession(cmd.Context(), sshc, strings.Join(command, " "), cmd.InOrStdin(), cmd.OutOrStdout(), cmd.ErrOrStderr())
	}
	return cmd
}

// runSession runs command (a shell when empty) in one session of sshc with
// the given streams and returns the remote exit status as an *exitError
// when it is not 0. A shell gets a PTY when stdin is a terminal.
func runSession(ctx context.Context, sshc *ssh.Client, command string, stdin io.Reader, stdout, stderr io.Writer) error {
	sess, err := sshc.NewSession()
	if err != nil {
		return fmt.Errorf("ssh: open a session: %w", err)
	}
	defer sess.Close()
	sess.Stdin, sess.Stdout, sess.Stderr = stdin, stdout, stderr
	if f, ok := stdin.(*os.File); ok && command == "" && term.IsTerminal(int(f.Fd())) {
		restore, err := startPTY(ctx, sess, int(f.Fd()), stdout)
		if err != nil {
			return err
		}
		defer restore()
	}
	if command == "" {
		err = sess.Shell()
	} else {
		err = sess.Start(command)
	}
	if err != nil {
		return fmt.Errorf("ssh: start: %w", err)
	}
	ended := make(chan struct{})
	go func() {
		select {
		case <-ctx.Done(): // interrupted: end the session
			_ = sess.Signal(ssh.SIGTERM)
			_ = sess.Close()
		case <-ended:
		}
	}()
	err = sess.Wait()
	close(ended)
	var ee *ssh.ExitError
	switch {
	case errors.As(err, &ee):
		return &exitError{code: ee.ExitStatus()}
	case ctx.Err() != nil:
		return &exitError{code: 130}
	case err != nil:
		return fmt.Errorf("ssh: %w", err)
	}
	return nil
}

// startPTY asks for a terminal the size of fd's, puts fd in raw mode and
// follows its window size (SIGWINCH); restore undoes it.
func startPTY(ctx context.Context, sess *ssh.Session, fd int, stdout io.Writer) (restore func(), err error) {
	w, h, err := term.GetSize(fd)
	if err != nil {
		w, h = 80, 24
	}
	termName := os.Getenv("TERM")
	if termName == "" {
		termName = "xterm-256color"
	}
	modes := ssh.TerminalModes{ssh.ECHO: 1, ssh.TTY_OP_ISPEED: 14400, ssh.TTY_OP_OSPEED: 14400}
	if err := sess.RequestPty(termName, h, w, modes); err != nil {
		return nil, fmt.Errorf("ssh: request a terminal: %w", err)
	}
	old, err := term.MakeRaw(fd)
	if err != nil {
		return nil, fmt.Errorf("ssh: raw mode: %w", err)
	}
	winch := make(chan os.Signal, 1)
	signal.Notify(winch, syscall.SIGWINCH)
	done := make(chan struct{})
	go func() {
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-winch:
				if w, h, err := term.GetSize(fd); err == nil {
					_ = sess.WindowChange(h, w)
				}
			}
		}
	}()
	return func() {
		signal.Stop(winch)
		close(done)
		_ = term.Restore(fd, old)
	}, nil
}

func newSSHProxyCmd() *cobra.Command {
	var o clientOptions
	var job, identity, knownHosts string
	cmd := &cobra.Command{
		Use:    "ssh-proxy RUN",
		Short:  "Connect stdin and stdout to a run's job's SSH (OpenSSH's ProxyCommand)",
		Hidden: true,
		Long: `The ProxyCommand of the ~/.ssh/config entries hoist attach writes: opens the
SSH connection to RUN's job through the server, records the job's host key
in the known_hosts file as "RUN <key>" for OpenSSH to check, then copies
stdin to the connection and the connection to stdout.`,
		Args: cobra.ExactArgs(1),
	}
	o.addProjectFlags(cmd.Flags())
	cmd.Flags().StringVar(&job, "job", "", "the submission (id or number; default the newest running)")
	cmd.Flags().StringVarP(&identity, "identity", "i", "", "the SSH private key whose public half the job accepts")
	cmd.Flags().StringVar(&knownHosts, "known-hosts", "", "the known_hosts file to record the job's host key in (default ~/.config/hoist/ssh/known_hosts)")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		c, err := o.connect(cmd)
		if err != nil {
			return err
		}
		run := args[0]
		key, err := loadUserKey(identity)
		if err != nil {
			return err
		}
		if knownHosts == "" {
			dir, err := sshDir()
			if err != nil {
				return err
			}
			knownHosts = filepath.Join(dir, "known_hosts")
		}
		conn, hostKey, err := c.DialSSH(cmd.Context(), run, job, key.authorizedKey())
		if err != nil {
			return fmt.Errorf("ssh-proxy: %w", err)
		}
		defer conn.Close()
		if _, _, err := jobHostKey(hostKey); err != nil {
			return err
		}
		if err := recordHostKey(knownHosts, run, hostKey); err != nil {
			return fmt.Errorf("ssh-proxy: %w", err)
		}
		proxy(cmd.Context(), conn, cmd.InOrStdin(), cmd.OutOrStdout())
		return nil
	}
	return cmd
}

// proxy copies in to conn and conn to out until conn ends, in ends or ctx
// is cancelled.
func proxy(ctx context.Context, conn net.Conn, in io.Reader, out io.Writer) {
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	go func() {
		_, _ = io.Copy(conn, in)
		conn.Close()
	}()
	_, _ = io.Copy(out, conn)
}

// recordHostKey makes host's line in the known_hosts file at path "host
// key", replacing the lines it had (a job's runner has a key of its own, so
// each new job of a run replaces the last one's).
func recordHostKey(path, host, key string) error {
	old, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	var out []string
	for _, l := range strings.Split(string(old), "\n") {
		if f := strings.Fields(l); len(f) == 0 || f[0] == host {
			continue
		}
		out = append(out, l)
	}
	out = append(out, host+" "+key)
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	return writeFileAtomic(path, []byte(strings.Join(out, "\n")+"\n"), 0o600)
}
