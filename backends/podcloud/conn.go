package podcloud

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/crypto/ssh"

	"hoist/agents/api"
	"hoist/backends"
	"hoist/backends/internal/agentauth"
	"hoist/backends/internal/shimserver"
	"hoist/backends/tunnel"
)

// Hosts under which the Conn's requests travel; none leaves the process
// as such: the shim's is answered in it, a runner's and a pod port's are
// dialed through SSH to the task's pod.
const (
	shimHost         = "pod-shim.hoist.invalid"
	runnerHostSuffix = ".runner.hoist.invalid"
	portHostSuffix   = ".pod.hoist.invalid"
)

// shimVersion is what the in-server shim reports as its version.
const shimVersion = "podcloud-shim"

// runnerAddr is the runner address (TaskInfo.RunnerAddr) of task id.
func runnerAddr(id string) string { return "http://" + id + runnerHostSuffix }

// portAddr is host:port of a port of task id's pod, as the Conn dials it
// (PortMapping.Addr).
func portAddr(id string, port int) string { return id + portHostSuffix + ":" + strconv.Itoa(port) }

// A conn is the Conn of one instance.
type conn struct {
	s    *shim
	hc   *http.Client
	tr   *http.Transport
	url  string
	once sync.Once
}

func newConn(b *Backend, rec instanceRecord) *conn {
	s := &shim{b: b, rec: rec, log: b.log.With("instance", rec.ID), clients: map[string]*tunnel.Client{}, seen: map[string]seenTask{}}
	tr := &http.Transport{DialContext: s.dial, MaxIdleConnsPerHost: 4, IdleConnTimeout: 90 * time.Second, DisableCompression: true}
	s.tr = tr
	url := "http://" + shimHost
	// The shim is in this process and wants no token; agentauth adds each
	// runner's (from the task list) to the requests for it.
	hc := &http.Client{Transport: &agentauth.Transport{
		Base:    &shimserver.InProcess{Host: shimHost, Handler: shimserver.Handler(s, shimVersion), Next: tr},
		ShimURL: url, Token: func() string { return "" },
	}}
	s.runners = hc
	return &conn{s: s, hc: hc, tr: tr, url: url}
}

// HTTPClient returns the client that reaches the shim, the runners and the
// pods' ports.
func (c *conn) HTTPClient() *http.Client { return c.hc }

// ShimURL returns the in-server shim's base URL.
func (c *conn) ShimURL() string { return c.url }

// Close closes the SSH connections to the pods; the pods are left as they
// are.
func (c *conn) Close() error {
	c.once.Do(func() {
		c.tr.CloseIdleConnections()
		c.s.closeClients()
	})
	return nil
}

// dial reaches a task's runner socket or a port of its pod through the SSH
// connection to the pod's runner.
func (s *shim) dial(ctx context.Context, _, addr string) (net.Conn, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	if id, ok := strings.CutSuffix(host, runnerHostSuffix); ok {
		cl, err := s.client(ctx, id)
		if err != nil {
			return nil, err
		}
		return cl.DialContext(ctx, "unix", api.StandaloneSocket)
	}
	if id, ok := strings.CutSuffix(host, portHostSuffix); ok {
		cl, err := s.client(ctx, id)
		if err != nil {
			return nil, err
		}
		return cl.DialContext(ctx, "tcp", net.JoinHostPort("127.0.0.1", port))
	}
	return nil, fmt.Errorf("%s backend %q: %s is no address of this instance's pods", s.b.kind, s.b.name, addr)
}

// client returns the SSH connection to task id's runner, dialing it when
// there is none (or it died).
func (s *shim) client(ctx context.Context, id string) (*tunnel.Client, error) {
	s.mu.Lock()
	cl := s.clients[id]
	s.mu.Unlock()
	if cl != nil && cl.Alive() {
		return cl, nil
	}
	rec, ok, err := s.b.taskRecord(ctx, id)
	if err != nil {
		return nil, err
	}
	if !ok || rec.Instance != s.rec.ID {
		return nil, fmt.Errorf("%s backend %q: task %s: %w", s.b.kind, s.b.name, id, backends.ErrNotFound)
	}
	if rec.PodID == "" {
		return nil, fmt.Errorf("%s backend %q: task %s has no pod yet: %w", s.b.kind, s.b.name, id, backends.ErrUnreachable)
	}
	pod, err := s.b.p.GetPod(ctx, rec.PodID)
	if err != nil {
		return nil, err
	}
	addr := pod.Ports[api.PodSSHPort]
	if addr == "" {
		return nil, fmt.Errorf("%s backend %q: pod %s exposes no port %d yet: %w", s.b.kind, s.b.name, rec.PodID, api.PodSSHPort, backends.ErrUnreachable)
	}
	signer, err := ssh.ParsePrivateKey([]byte(rec.ClientKey))
	if err != nil {
		return nil, fmt.Errorf("task %s: client key: %w", id, err)
	}
	host, err := ssh.ParsePrivateKey([]byte(rec.HostKey))
	if err != nil {
		return nil, fmt.Errorf("task %s: host key: %w", id, err)
	}
	cl, err = tunnel.Dial(ctx, tunnel.Config{Addr: addr, User: "root", Signers: []ssh.Signer{signer},
		HostKeys: []ssh.PublicKey{host.PublicKey()}, Logger: s.log})
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	if old := s.clients[id]; old != nil && old != cl {
		old.Close()
	}
	s.clients[id] = cl
	s.mu.Unlock()
	return cl, nil
}

// forget closes and drops the SSH connection to task id's runner.
func (s *shim) forget(id string) {
	s.mu.Lock()
	cl := s.clients[id]
	delete(s.clients, id)
	delete(s.seen, id)
	s.mu.Unlock()
	if cl != nil {
		cl.Close()
	}
}

func (s *shim) closeClients() {
	s.mu.Lock()
	cls := s.clients
	s.clients = map[string]*tunnel.Client{}
	s.mu.Unlock()
	for _, cl := range cls {
		cl.Close()
	}
}
