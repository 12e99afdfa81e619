package runner

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/crypto/ssh"

	"hoist/agents/api"
	"hoist/agents/internal/agenthttp"
)

// hostKeyFile is the runner's SSH host key in its home, in OpenSSH's
// private key format: generated on first start and kept, so that a client
// that reconnects (or a runner restarted on the same home) sees the same key.
const hostKeyFile = "ssh_host_ed25519_key"

// sshHandshakeTimeout bounds an SSH connection's key exchange and
// authentication.
const sshHandshakeTimeout = 30 * time.Second

// sshDialTimeout bounds the dial of a direct-tcpip channel's target.
const sshDialTimeout = 10 * time.Second

// sshKeepalive is how often the runner asks a quiet client whether it is
// still there (keepalive@openssh.com, as sshd's ClientAliveInterval), and
// sshKeepaliveMax how many intervals an answer may take before the
// connection is closed as dead: a vanished client must not keep counting as
// attached (api.SSHActivity). Variables for the tests, read by New.
var (
	sshKeepalive    = time.Minute
	sshKeepaliveMax = 5
)

// sshServerVersion is the identification string the runner sends
// (RFC 4253 section 4.2).
const sshServerVersion = "SSH-2.0-hoist-runner"

// sshServer is the runner's SSH server (see api.SSHPath). It serves
// connections taken over from the runner's HTTP API, for a job on a
// cluster of several nodes those of the other nodes on the cluster's port
// (listen), and for a standalone runner those on its own port
// (Runner.ServeSSH). It tracks the authenticated connections
// (api.SSHActivity) and the sessions' processes, and ends both when the job
// ends, except the connections on a standalone runner's port: the server
// controls the runner through them before, during and after its job.
type sshServer struct {
	r       *Runner
	signer  ssh.Signer
	hostKey string // the public host key in authorized_keys form
	// keepaliveEvery and keepaliveMax are sshKeepalive and
	// sshKeepaliveMax when the server was made.
	keepaliveEvery time.Duration
	keepaliveMax   int

	mu             sync.Mutex
	authorizedKeys []ssh.PublicKey // the job spec's AuthorizedKeys, parsed
	started        time.Time       // when the job started running
	conns          map[*ssh.ServerConn]struct{}
	sessions       map[int]struct{} // session ids (leader pids) of the sessions started
	lastClosed     time.Time        // when the last connection closed
	closed         bool             // the job ended: no more connections
	// listeners are the TCP ports the server also accepts connections
	// on: a cluster's node's ClusterSSHPort (clusterssh.go).
	listeners []net.Listener

	// apiSocket, when set, is the path of the runner's API socket: a
	// direct-streamlocal channel to it (or to api.StandaloneSocket) opens
	// whatever the job's state (Runner.ServeSSH).
	apiSocket string
	// control are the connections on a standalone runner's port, and
	// controlLn that port's listener: both stay open when the job ends,
	// until Runner.Close (shut).
	control   map[*ssh.ServerConn]struct{}
	controlLn net.Listener
	shut      bool
}

// setAuthorizedKeys records the job spec's authorized keys.
func (s *sshServer) setAuthorizedKeys(keys []ssh.PublicKey) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.authorizedKeys = keys
}

// jobStarted records when the job started running (api.SSHActivity).
func (s *sshServer) jobStarted(t time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.started = t
}

// newSSHServer returns r's SSH server with hostKey, or with the host key
// kept in home when hostKey is nil.
func newSSHServer(r *Runner, home string, hostKey ssh.Signer) (*sshServer, error) {
	signer := hostKey
	if signer == nil {
		var err error
		if signer, err = loadHostKey(filepath.Join(home, hostKeyFile)); err != nil {
			return nil, err
		}
	}
	return &sshServer{
		r:        r,
		signer:   signer,
		hostKey:  strings.TrimSpace(string(ssh.MarshalAuthorizedKey(signer.PublicKey()))),
		conns:    map[*ssh.ServerConn]struct{}{},
		control:  map[*ssh.ServerConn]struct{}{},
		sessions: map[int]struct{}{},

		keepaliveEvery: sshKeepalive,
		keepaliveMax:   sshKeepaliveMax,
	}, nil
}

// loadHostKey reads the host key at path, or generates an ed25519 key and
// writes it there (0600) when there is none.
func loadHostKey(path string) (ssh.Signer, error) {
	b, err := os.ReadFile(path)
	if err == nil {
		s, err := ssh.ParsePrivateKey(b)
		if err != nil {
			return nil, fmt.Errorf("ssh host key %s: %w", path, err)
		}
		return s, nil
	}
	if !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("ssh host key: %w", err)
	}
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("ssh host key: %w", err)
	}
	block, err := ssh.MarshalPrivateKey(priv, "hoist-runner")
	if err != nil {
		return nil, fmt.Errorf("ssh host key: %w", err)
	}
	tmp := path + ".tmp"
	_ = os.Remove(tmp)
	if err := os.WriteFile(tmp, pem.EncodeToMemory(block), 0o600); err != nil {
		return nil, fmt.Errorf("ssh host key: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return nil, fmt.Errorf("ssh host key: %w", err)
	}
	return ssh.NewSignerFromKey(priv)
}

// parseAuthorizedKey parses one authorized_keys line. Options (command=,
// from=, ...) are refused rather than ignored: the runner does not enforce
// them.
func parseAuthorizedKey(line string) (ssh.PublicKey, error) {
	k, _, opts, rest, err := ssh.ParseAuthorizedKey([]byte(line))
	if err != nil {
		return nil, fmt.Errorf("parse authorized key: %w", err)
	}
	if len(opts) > 0 {
		return nil, fmt.Errorf("authorized key %s: options (%s) are not supported", ssh.FingerprintSHA256(k), strings.Join(opts, ","))
	}
	if len(bytes.TrimSpace(rest)) > 0 {
		return nil, errors.New("authorized key: one key per line")
	}
	return k, nil
}

// handleSSH serves GET api.SSHPath: it answers 101 Switching Protocols and
// speaks SSH on the connection until it closes.
func (r *Runner) handleSSH(w http.ResponseWriter, req *http.Request) {
	if !strings.EqualFold(req.Header.Get("Upgrade"), api.SSHUpgrade) || !headerHasToken(req.Header.Values("Connection"), "upgrade") {
		w.Header().Set("Upgrade", api.SSHUpgrade)
		w.Header().Set("Connection", "Upgrade")
		agenthttp.WriteJSON(w, http.StatusUpgradeRequired, api.Error{Message: "GET " + api.SSHPath + " needs Connection: Upgrade and Upgrade: " + api.SSHUpgrade})
		return
	}
	var extra []ssh.PublicKey
	for _, line := range req.Header.Values(api.AuthorizedKeyHeader) {
		k, err := parseAuthorizedKey(line)
		if err != nil {
			agenthttp.WriteJSON(w, http.StatusBadRequest, api.Error{Message: api.AuthorizedKeyHeader + ": " + err.Error()})
			return
		}
		extra = append(extra, k)
	}
	if st := r.State(); st.Finished() {
		agenthttp.WriteJSON(w, http.StatusConflict, api.Error{Message: "the job has " + st.State + ": there is nothing to SSH into"})
		return
	}
	conn, brw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		agenthttp.WriteJSON(w, http.StatusInternalServerError, api.Error{Message: "ssh upgrade: " + err.Error()})
		return
	}
	h := w.Header().Clone()
	h.Del("Content-Type")
	h.Set("Connection", "Upgrade")
	h.Set("Upgrade", api.SSHUpgrade)
	h.Set(api.HostKeyHeader, r.ssh.hostKey)
	_ = conn.SetWriteDeadline(time.Now().Add(sshHandshakeTimeout))
	_, _ = brw.WriteString("HTTP/1.1 101 Switching Protocols\r\n")
	_ = h.Write(brw)
	_, _ = brw.WriteString("\r\n")
	if err := brw.Flush(); err != nil {
		conn.Close()
		return
	}
	var nc net.Conn = conn
	if n := brw.Reader.Buffered(); n > 0 {
		b, _ := brw.Reader.Peek(n)
		nc = &prefixConn{Conn: conn, prefix: bytes.Clone(b)}
	}
	r.ssh.serve(nc, extra, false)
}

// headerHasToken reports whether the comma-separated header values hold
// token (case-insensitively), as Connection: keep-alive, Upgrade does.
func headerHasToken(values []string, token string) bool {
	for _, v := range values {
		for t := range strings.SplitSeq(v, ",") {
			if strings.EqualFold(strings.TrimSpace(t), token) {
				return true
			}
		}
	}
	return false
}

// prefixConn is a net.Conn whose first bytes were already read off it.
type prefixConn struct {
	net.Conn
	prefix []byte
}

func (c *prefixConn) Read(p []byte) (int, error) {
	if len(c.prefix) > 0 {
		n := copy(p, c.prefix)
		c.prefix = c.prefix[n:]
		return n, nil
	}
	return c.Conn.Read(p)
}

// errKeyNotAuthorized refuses a public key.
var errKeyNotAuthorized = errors.New("public key not authorized")

// serve runs the SSH protocol on nc until the connection closes. extra are
// keys accepted on this connection besides the job's authorized keys;
// control marks a connection on a standalone runner's port, which outlives
// the job.
func (s *sshServer) serve(nc net.Conn, extra []ssh.PublicKey, control bool) {
	cfg := &ssh.ServerConfig{
		PublicKeyCallback: func(_ ssh.ConnMetadata, key ssh.PublicKey) (*ssh.Permissions, error) {
			if !s.keyAuthorized(key, extra) {
				return nil, errKeyNotAuthorized
			}
			return &ssh.Permissions{Extensions: map[string]string{"fingerprint": ssh.FingerprintSHA256(key)}}, nil
		},
		ServerVersion: sshServerVersion,
	}
	cfg.AddHostKey(s.signer)
	_ = nc.SetDeadline(time.Now().Add(sshHandshakeTimeout))
	sc, chans, reqs, err := ssh.NewServerConn(nc, cfg)
	if err != nil {
		s.r.log.Info("ssh_handshake_failed", "err", err)
		nc.Close()
		return
	}
	_ = nc.SetDeadline(time.Time{})
	if !s.add(sc, control) {
		sc.Close()
		return
	}
	s.r.log.Info("ssh_connection_opened", "user", sc.User(), "key", sc.Permissions.Extensions["fingerprint"])
	var wg sync.WaitGroup
	wg.Go(func() { ssh.DiscardRequests(reqs) })
	gone := make(chan struct{})
	wg.Go(func() { s.keepalive(sc, gone) })
	for nch := range chans {
		if path, ok := s.apiChannel(nch); ok {
			wg.Go(func() { forward(nch, "unix", path) })
			continue
		}
		if msg, ok := s.r.sshAllowed(); !ok {
			_ = nch.Reject(ssh.Prohibited, msg)
			continue
		}
		switch nch.ChannelType() {
		case "session":
			wg.Go(func() { s.session(nch) })
		case "direct-tcpip":
			wg.Go(func() { s.directTCPIP(nch) })
		case "direct-streamlocal@openssh.com":
			wg.Go(func() { s.directStreamLocal(nch) })
		default:
			_ = nch.Reject(ssh.UnknownChannelType, "channel type "+nch.ChannelType()+" is not supported")
		}
	}
	close(gone)
	s.remove(sc)
	s.r.log.Info("ssh_connection_closed", "user", sc.User())
	wg.Wait()
}

// keepalive closes sc when its client leaves a keepalive unanswered for
// keepaliveMax intervals; it returns once gone is closed.
func (s *sshServer) keepalive(sc *ssh.ServerConn, gone <-chan struct{}) {
	limit := time.Duration(s.keepaliveMax) * s.keepaliveEvery
	tick := time.NewTicker(s.keepaliveEvery)
	defer tick.Stop()
	for {
		select {
		case <-gone:
			return
		case <-tick.C:
		}
		answered := make(chan struct{})
		go func() {
			// Any answer will do: clients refuse requests they do not know.
			_, _, _ = sc.SendRequest("keepalive@openssh.com", true, nil)
			close(answered)
		}()
		select {
		case <-gone:
			return
		case <-answered:
		case <-time.After(limit):
			s.r.log.Warn("ssh_client_unresponsive", "user", sc.User(), "waited", limit)
			sc.Close()
			<-gone
			return
		}
	}
}

// add registers an authenticated connection; false once the job has ended
// (for a control connection: once the runner is closed).
func (s *sshServer) add(sc *ssh.ServerConn, control bool) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if control {
		if s.shut {
			return false
		}
		s.control[sc] = struct{}{}
		return true
	}
	if s.closed {
		return false
	}
	s.conns[sc] = struct{}{}
	return true
}

func (s *sshServer) remove(sc *ssh.ServerConn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.control[sc]; ok {
		delete(s.control, sc)
		sc.Close()
		return
	}
	if _, ok := s.conns[sc]; !ok {
		return
	}
	delete(s.conns, sc)
	s.lastClosed = s.r.now()
	sc.Close()
}

// trackSession registers a session's process, the leader of its own
// session, whose processes are killed when the job ends (those it left
// behind too); false once the job has ended, and the caller must kill it.
func (s *sshServer) trackSession(sid int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.sessions[sid] = struct{}{}
	return true
}

// closeAll ends SSH for good: it closes every connection and kills every
// process of every session. The job has ended.
func (s *sshServer) closeAll() {
	s.mu.Lock()
	s.closed = true
	for _, ln := range s.listeners {
		ln.Close()
	}
	s.listeners = nil
	conns := make([]*ssh.ServerConn, 0, len(s.conns))
	for c := range s.conns {
		conns = append(conns, c)
	}
	sids := make([]int, 0, len(s.sessions))
	for sid := range s.sessions {
		sids = append(sids, sid)
	}
	s.mu.Unlock()
	for _, c := range conns {
		c.Close()
	}
	for _, sid := range sids {
		killSession(sid)
	}
}

// shutdown closes what closeAll leaves open: a standalone runner's port
// and the connections on it. The runner is closing.
func (s *sshServer) shutdown() {
	s.closeAll()
	s.mu.Lock()
	s.shut = true
	ln := s.controlLn
	s.controlLn = nil
	conns := make([]*ssh.ServerConn, 0, len(s.control))
	for c := range s.control {
		conns = append(conns, c)
	}
	s.mu.Unlock()
	if ln != nil {
		ln.Close()
	}
	for _, c := range conns {
		c.Close()
	}
}

// apiChannel reports whether nch is a direct-streamlocal channel to the
// runner's own API socket (by its path or api.StandaloneSocket), which
// opens whatever the job's state, and returns the socket's path.
func (s *sshServer) apiChannel(nch ssh.NewChannel) (string, bool) {
	if nch.ChannelType() != "direct-streamlocal@openssh.com" {
		return "", false
	}
	s.mu.Lock()
	socket := s.apiSocket
	s.mu.Unlock()
	if socket == "" {
		return "", false
	}
	var p directStreamLocalRequest
	if err := ssh.Unmarshal(nch.ExtraData(), &p); err != nil {
		return "", false
	}
	if p.SocketPath != socket && p.SocketPath != api.StandaloneSocket {
		return "", false
	}
	return socket, true
}

// keyAuthorized reports whether key is one of the job's authorized keys or
// of extra.
func (s *sshServer) keyAuthorized(key ssh.PublicKey, extra []ssh.PublicKey) bool {
	want := key.Marshal()
	s.mu.Lock()
	keys := s.authorizedKeys
	s.mu.Unlock()
	for _, set := range [][]ssh.PublicKey{keys, extra} {
		for _, k := range set {
			if bytes.Equal(k.Marshal(), want) {
				return true
			}
		}
	}
	return false
}

// sshAllowed reports whether channels may open now (the job runs), and
// if not, why.
func (r *Runner) sshAllowed() (string, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch r.state.State {
	case api.JobRunning:
		return "", true
	case api.JobPending:
		return "the job has not started yet: sessions and port forwarding open once it runs", false
	default:
		return "the job has " + r.state.State, false
	}
}

// directTCPIPRequest is the payload of a direct-tcpip channel open
// (RFC 4254 section 7.2).
type directTCPIPRequest struct {
	Host       string
	Port       uint32
	OriginHost string
	OriginPort uint32
}

// directTCPIP serves port forwarding (ssh -L, hoist attach): it dials the
// requested address from the runner, that is from inside the container's
// network namespace, and relays bytes both ways. Like dstack's sshd (OpenSSH
// with its default AllowTcpForwarding yes), it dials any address: whoever
// holds an accepted key can run commands in the job anyway.
func (s *sshServer) directTCPIP(nch ssh.NewChannel) {
	var p directTCPIPRequest
	if err := ssh.Unmarshal(nch.ExtraData(), &p); err != nil || p.Port == 0 || p.Port > 65535 {
		_ = nch.Reject(ssh.ConnectionFailed, "malformed direct-tcpip request")
		return
	}
	forward(nch, "tcp", net.JoinHostPort(p.Host, strconv.FormatUint(uint64(p.Port), 10)))
}

// directStreamLocalRequest is the payload of a
// direct-streamlocal@openssh.com channel open (OpenSSH's PROTOCOL, section
// 2.4).
type directStreamLocalRequest struct {
	SocketPath string
	Reserved0  string
	Reserved1  uint32
}

// directStreamLocal serves Unix socket forwarding (ssh -L to a socket path;
// VS Code's remote.SSH.remoteServerListenOnSocket), like directTCPIP.
func (s *sshServer) directStreamLocal(nch ssh.NewChannel) {
	var p directStreamLocalRequest
	if err := ssh.Unmarshal(nch.ExtraData(), &p); err != nil || p.SocketPath == "" {
		_ = nch.Reject(ssh.ConnectionFailed, "malformed direct-streamlocal request")
		return
	}
	forward(nch, "unix", p.SocketPath)
}

// forward dials addr on network and relays a channel's bytes to it and
// back until both directions have ended or the channel is closed.
func forward(nch ssh.NewChannel, network, addr string) {
	ctx, cancel := context.WithTimeout(context.Background(), sshDialTimeout)
	c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
	cancel()
	if err != nil {
		_ = nch.Reject(ssh.ConnectionFailed, err.Error())
		return
	}
	ch, reqs, err := nch.Accept()
	if err != nil {
		c.Close()
		return
	}
	gone := make(chan struct{})
	go func() {
		// The requests end when the channel is closed (or the connection
		// lost): then nothing is read from the target any more.
		ssh.DiscardRequests(reqs)
		c.Close()
		close(gone)
	}()
	var copies sync.WaitGroup
	copies.Go(func() {
		_, _ = io.Copy(c, ch)
		if hc, ok := c.(interface{ CloseWrite() error }); ok {
			_ = hc.CloseWrite()
		}
	})
	copies.Go(func() {
		_, _ = io.Copy(ch, c)
		_ = ch.CloseWrite()
	})
	copies.Wait()
	ch.Close()
	c.Close()
	<-gone
}

// killSession kills every process of session sid (see setsid(2)):
// processes the session put in process groups of their own too.
func killSession(sid int) {
	_ = syscall.Kill(-sid, syscall.SIGKILL)
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return
	}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if s, ok := procSession(pid); ok && s == sid {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// procSession returns the session id of process pid (see proc_pid_stat(5)).
func procSession(pid int) (int, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, false
	}
	// pid (comm) state ppid pgrp session ...; comm may hold spaces and parens.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, false
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 4 {
		return 0, false
	}
	sid, err := strconv.Atoi(f[3])
	return sid, err == nil
}
