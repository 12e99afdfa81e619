package tunnel

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/skeema/knownhosts"
	"golang.org/x/crypto/ssh"

	"hoist/backends"
)

// Defaults for Config's durations.
const (
	DefaultDialTimeout      = 5 * time.Second
	DefaultHandshakeTimeout = 10 * time.Second
	DefaultKeepAlive        = 15 * time.Second
)

// Config says how to reach one host.
type Config struct {
	// Addr is host:port.
	Addr string
	// User is the login user.
	User string
	// Signers authenticate the user.
	Signers []ssh.Signer
	// HostKeys pins the host: only these keys are accepted.
	HostKeys []ssh.PublicKey
	// KnownHosts is known_hosts content to pin the host from when HostKeys
	// is empty.
	KnownHosts string
	// TrustOnFirstUse accepts any key when neither HostKeys nor KnownHosts
	// name one for the host; Client.HostKey returns the key seen. Without it,
	// an unpinned host is refused.
	TrustOnFirstUse bool
	// DialTimeout bounds the TCP dial (DefaultDialTimeout when zero).
	DialTimeout time.Duration
	// HandshakeTimeout bounds the SSH handshake and authentication
	// (DefaultHandshakeTimeout when zero).
	HandshakeTimeout time.Duration
	// KeepAlive is the keepalive interval (DefaultKeepAlive when zero,
	// negative disables). A keepalive unanswered within the interval closes
	// the connection.
	KeepAlive time.Duration
	// Jump is the host to reach Addr through, if any.
	Jump *Config
	// Logger receives connection events; nil discards.
	Logger *slog.Logger
}

// A Client is one SSH connection to a host. Channels multiplex: one Client
// per host is enough for any number of commands and HTTP connections.
type Client struct {
	ssh     *ssh.Client
	jump    *Client
	hostKey ssh.PublicKey
	addr    string
	log     *slog.Logger
	done    chan struct{}
	once    sync.Once

	hcMu sync.Mutex
	hc   *http.Client
}

// Dial connects and authenticates to cfg.Addr (through cfg.Jump when set)
// within the dial and handshake deadlines, which also apply when ctx has no
// deadline.
func Dial(ctx context.Context, cfg Config) (*Client, error) {
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	var jump *Client
	var conn net.Conn
	var err error
	dialTimeout := orDefault(cfg.DialTimeout, DefaultDialTimeout)
	if cfg.Jump != nil {
		jc := *cfg.Jump
		if jc.Logger == nil {
			jc.Logger = log
		}
		jc.KeepAlive = orDefault(jc.KeepAlive, cfg.KeepAlive)
		jump, err = Dial(ctx, jc)
		if err != nil {
			return nil, fmt.Errorf("proxy jump %s: %w", cfg.Jump.Addr, err)
		}
		dctx, cancel := context.WithTimeout(ctx, dialTimeout)
		conn, err = jump.ssh.DialContext(dctx, "tcp", cfg.Addr)
		cancel()
		if err != nil {
			jump.Close()
			return nil, unreachable(cfg.Addr, fmt.Errorf("dial through %s: %w", cfg.Jump.Addr, err))
		}
	} else {
		d := net.Dialer{Timeout: dialTimeout}
		conn, err = d.DialContext(ctx, "tcp", cfg.Addr)
		if err != nil {
			return nil, unreachable(cfg.Addr, err)
		}
	}
	c, err := handshake(ctx, conn, cfg, log)
	if err != nil {
		conn.Close()
		if jump != nil {
			jump.Close()
		}
		return nil, err
	}
	c.jump = jump
	if ka := orDefault(cfg.KeepAlive, DefaultKeepAlive); ka > 0 {
		go c.keepalive(ka)
	}
	go func() {
		_ = c.ssh.Wait()
		c.markDone()
	}()
	return c, nil
}

func orDefault(d, def time.Duration) time.Duration {
	if d == 0 {
		return def
	}
	return d
}

func unreachable(addr string, err error) error {
	return backends.Transient(fmt.Errorf("ssh %s: %w: %w", addr, backends.ErrUnreachable, err))
}

// handshake runs the SSH handshake on conn under a deadline: the conn's own
// deadline where supported, and a timer that closes conn otherwise (channels
// of a jump connection have no deadlines).
func handshake(ctx context.Context, conn net.Conn, cfg Config, log *slog.Logger) (*Client, error) {
	timeout := orDefault(cfg.HandshakeTimeout, DefaultHandshakeTimeout)
	deadline := time.Now().Add(timeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	_ = conn.SetDeadline(deadline)
	timedOut := make(chan struct{})
	timer := time.AfterFunc(time.Until(deadline), func() {
		close(timedOut)
		conn.Close()
	})
	stop := context.AfterFunc(ctx, func() { conn.Close() })

	hk, algos, err := hostKeyPolicy(cfg)
	if err != nil {
		timer.Stop()
		stop()
		return nil, err
	}
	var seen ssh.PublicKey
	sc := &ssh.ClientConfig{
		User: cfg.User,
		Auth: []ssh.AuthMethod{ssh.PublicKeys(cfg.Signers...)},
		HostKeyCallback: func(host string, remote net.Addr, key ssh.PublicKey) error {
			seen = key
			return hk(host, remote, key)
		},
		HostKeyAlgorithms: algos,
	}
	cc, chans, reqs, err := ssh.NewClientConn(conn, cfg.Addr, sc)
	timer.Stop()
	stop()
	if err != nil {
		var mismatch *hostKeyError
		switch {
		case errors.As(err, &mismatch):
			return nil, backends.Stalled(fmt.Errorf("ssh %s: %w: %s", cfg.Addr, backends.ErrHostKeyMismatch, mismatch.msg))
		case isClosed(timedOut):
			return nil, unreachable(cfg.Addr, fmt.Errorf("handshake timed out after %s", timeout))
		case ctx.Err() != nil:
			return nil, fmt.Errorf("ssh %s: %w", cfg.Addr, ctx.Err())
		case strings.Contains(err.Error(), "unable to authenticate"):
			return nil, backends.Stalled(fmt.Errorf("ssh %s: authentication as %q refused: %w", cfg.Addr, cfg.User, err))
		default:
			return nil, unreachable(cfg.Addr, fmt.Errorf("handshake: %w", err))
		}
	}
	_ = conn.SetDeadline(time.Time{})
	log.Debug("ssh_connected", "addr", cfg.Addr, "host_key", ssh.FingerprintSHA256(seen))
	return &Client{
		ssh:     ssh.NewClient(cc, chans, reqs),
		hostKey: seen,
		addr:    cfg.Addr,
		log:     log,
		done:    make(chan struct{}),
	}, nil
}

func isClosed(ch chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// hostKeyError is what our host key callback returns on a mismatch; the
// handshake turns it into a stalled backends.ErrHostKeyMismatch.
type hostKeyError struct{ msg string }

// Error returns the mismatch description.
func (e *hostKeyError) Error() string { return e.msg }

// hostKeyPolicy returns the host key callback and the host key algorithms to
// offer for cfg.
func hostKeyPolicy(cfg Config) (ssh.HostKeyCallback, []string, error) {
	if len(cfg.HostKeys) > 0 {
		pinned := cfg.HostKeys
		return func(_ string, _ net.Addr, key ssh.PublicKey) error {
			for _, p := range pinned {
				if bytes.Equal(p.Marshal(), key.Marshal()) {
					return nil
				}
			}
			return &hostKeyError{msg: fmt.Sprintf("host presented %s %s, pinned %s", key.Type(), ssh.FingerprintSHA256(key), fingerprints(pinned))}
		}, Algorithms(pinned), nil
	}
	if strings.TrimSpace(cfg.KnownHosts) != "" {
		db, err := knownHostsDB(cfg.KnownHosts)
		if err != nil {
			return nil, nil, backends.Stalled(fmt.Errorf("ssh %s: known_hosts: %w", cfg.Addr, err))
		}
		if algos := db.HostKeyAlgorithms(cfg.Addr); len(algos) > 0 {
			cb := db.HostKeyCallback()
			return func(host string, remote net.Addr, key ssh.PublicKey) error {
				if err := cb(host, remote, key); err != nil {
					return &hostKeyError{msg: fmt.Sprintf("known_hosts: %v (host presented %s %s)", err, key.Type(), ssh.FingerprintSHA256(key))}
				}
				return nil
			}, algos, nil
		}
	}
	if cfg.TrustOnFirstUse {
		return func(string, net.Addr, ssh.PublicKey) error { return nil }, nil, nil
	}
	return func(_ string, _ net.Addr, key ssh.PublicKey) error {
		return &hostKeyError{msg: fmt.Sprintf("host key %s %s is not pinned and trust on first use is off", key.Type(), ssh.FingerprintSHA256(key))}
	}, nil, nil
}

func knownHostsDB(content string) (*knownhosts.HostKeyDB, error) {
	f, err := os.CreateTemp("", "hoist-known-hosts-*")
	if err != nil {
		return nil, err
	}
	defer os.Remove(f.Name())
	if _, err := f.WriteString(content); err != nil {
		f.Close()
		return nil, err
	}
	if err := f.Close(); err != nil {
		return nil, err
	}
	return knownhosts.NewDB(f.Name())
}

func fingerprints(keys []ssh.PublicKey) string {
	fps := make([]string, len(keys))
	for i, k := range keys {
		fps[i] = ssh.FingerprintSHA256(k)
	}
	return strings.Join(fps, ", ")
}

// Algorithms returns the host key algorithms to offer for keys, so that the
// server presents a pinned key rather than its preferred one (golang/go#29286):
// an ssh-rsa key also admits rsa-sha2-512 and rsa-sha2-256.
func Algorithms(keys []ssh.PublicKey) []string {
	var out []string
	add := func(a string) {
		for _, x := range out {
			if x == a {
				return
			}
		}
		out = append(out, a)
	}
	for _, k := range keys {
		if k.Type() == ssh.KeyAlgoRSA {
			add(ssh.KeyAlgoRSASHA512)
			add(ssh.KeyAlgoRSASHA256)
		}
		add(k.Type())
	}
	return out
}

// ParseHostKeys parses keys in authorized_keys format ("ssh-ed25519 AAAA...
// [comment]").
func ParseHostKeys(lines []string) ([]ssh.PublicKey, error) {
	var out []ssh.PublicKey
	for _, l := range lines {
		if strings.TrimSpace(l) == "" {
			continue
		}
		k, _, _, _, err := ssh.ParseAuthorizedKey([]byte(l))
		if err != nil {
			return nil, fmt.Errorf("host key %q: %w", l, err)
		}
		out = append(out, k)
	}
	return out, nil
}

// MarshalHostKey renders a key in authorized_keys format without the newline.
func MarshalHostKey(k ssh.PublicKey) string {
	return strings.TrimSpace(string(ssh.MarshalAuthorizedKey(k)))
}

// HostPort joins host and port (22 when 0).
func HostPort(host string, port int) string {
	if port == 0 {
		port = 22
	}
	return net.JoinHostPort(host, strconv.Itoa(port))
}

func (c *Client) keepalive(every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-c.done:
			return
		case <-t.C:
		}
		timer := time.AfterFunc(every, func() {
			c.log.Warn("ssh_keepalive_timeout", "addr", c.addr)
			c.Close()
		})
		_, _, err := c.ssh.SendRequest("keepalive@openssh.com", true, nil)
		timer.Stop()
		if err != nil {
			c.log.Warn("ssh_keepalive_failed", "addr", c.addr, "error", err)
			c.Close()
			return
		}
	}
}

func (c *Client) markDone() { c.once.Do(func() { close(c.done) }) }

// HostKey returns the key the host presented.
func (c *Client) HostKey() ssh.PublicKey { return c.hostKey }

// JumpHostKey returns the key the proxy jump host presented, or nil without
// a jump host.
func (c *Client) JumpHostKey() ssh.PublicKey {
	if c.jump == nil {
		return nil
	}
	return c.jump.hostKey
}

// Addr returns the address the client is connected to.
func (c *Client) Addr() string { return c.addr }

// Done is closed when the connection is gone (closed, or keepalive failed).
func (c *Client) Done() <-chan struct{} { return c.done }

// Alive reports whether the connection is still up.
func (c *Client) Alive() bool { return !isClosed(c.done) }

// Close closes the connection (and the jump connection, if any).
func (c *Client) Close() error {
	c.hcMu.Lock()
	if c.hc != nil {
		c.hc.CloseIdleConnections()
	}
	c.hcMu.Unlock()
	err := c.ssh.Close()
	c.markDone()
	if c.jump != nil {
		c.jump.Close()
	}
	return err
}

// DialContext opens a TCP connection from the host to addr (as the host sees
// it) as a direct-tcpip channel.
func (c *Client) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	conn, err := c.ssh.DialContext(ctx, network, addr)
	if err != nil {
		if !c.Alive() {
			return nil, unreachable(c.addr, err)
		}
		return nil, fmt.Errorf("ssh %s: dial %s: %w", c.addr, addr, err)
	}
	return conn, nil
}

// HTTPClient returns the HTTP client whose every connection is dialed from
// the host through this SSH connection: http://127.0.0.1:PORT reaches the
// host's loopback. The client is made once per Client and shared; it has no
// overall timeout (callers use contexts).
func (c *Client) HTTPClient() *http.Client {
	c.hcMu.Lock()
	defer c.hcMu.Unlock()
	if c.hc == nil {
		c.hc = &http.Client{Transport: &http.Transport{
			DialContext:         c.DialContext,
			MaxIdleConnsPerHost: 4,
			IdleConnTimeout:     90 * time.Second,
			DisableCompression:  true,
		}}
	}
	return c.hc
}

// ExitError is returned by Run when the remote command exits non-zero.
type ExitError struct {
	// Status is the exit status.
	Status int
	// Stderr is the command's standard error, trimmed.
	Stderr string
}

// Error describes the exit.
func (e *ExitError) Error() string {
	return fmt.Sprintf("exit status %d: %s", e.Status, e.Stderr)
}

// Run runs cmd in a session on the host with stdin (may be nil) and returns
// its standard output. A non-zero exit is an *ExitError; ctx cancellation
// closes the session.
func (c *Client) Run(ctx context.Context, cmd string, stdin io.Reader) ([]byte, error) {
	s, err := c.ssh.NewSession()
	if err != nil {
		if !c.Alive() {
			return nil, unreachable(c.addr, err)
		}
		return nil, fmt.Errorf("ssh %s: new session: %w", c.addr, err)
	}
	defer s.Close()
	var stdout, stderr bytes.Buffer
	s.Stdout, s.Stderr, s.Stdin = &stdout, &stderr, stdin
	stop := context.AfterFunc(ctx, func() {
		_ = s.Signal(ssh.SIGKILL)
		s.Close()
	})
	err = s.Run(cmd)
	stop()
	if err != nil {
		if ctx.Err() != nil {
			return stdout.Bytes(), fmt.Errorf("ssh %s: run: %w", c.addr, ctx.Err())
		}
		var ee *ssh.ExitError
		if errors.As(err, &ee) {
			return stdout.Bytes(), &ExitError{Status: ee.ExitStatus(), Stderr: strings.TrimSpace(stderr.String())}
		}
		if !c.Alive() {
			return stdout.Bytes(), unreachable(c.addr, err)
		}
		return stdout.Bytes(), fmt.Errorf("ssh %s: run: %w", c.addr, err)
	}
	return stdout.Bytes(), nil
}

// Upload writes r to path on the host with mode, atomically (a temporary file
// renamed into place), creating the parent directory.
func (c *Client) Upload(ctx context.Context, path string, mode os.FileMode, r io.Reader) error {
	q := Quote(path)
	tmp := Quote(path + ".part")
	cmd := fmt.Sprintf("mkdir -p \"$(dirname %s)\" && cat > %s && chmod %o %s && mv -f %s %s", q, tmp, mode.Perm(), tmp, tmp, q)
	if _, err := c.Run(ctx, cmd, r); err != nil {
		return fmt.Errorf("upload %s: %w", path, err)
	}
	return nil
}

// Quote quotes s for a POSIX shell.
func Quote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
