package kubernetes

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/httpstream"
	"k8s.io/client-go/tools/portforward"
	"k8s.io/client-go/transport/spdy"
)

// A forwarder dials ports of pods through the API server's port-forward
// subresource
// (https://kubernetes.io/docs/tasks/access-application-cluster/port-forward-access-application-cluster/),
// as kubectl port-forward does, but without a local listener: each dial is
// a pair of streams (error and data) on one upgraded connection per pod,
// and the data stream is the net.Conn. Nothing listens on this machine and
// nothing in the cluster is exposed.
type forwarder struct {
	c *cluster

	mu    sync.Mutex
	conns map[string]*podStreams // by pod name
	done  bool
}

// podStreams is the upgraded port-forward connection to one pod.
type podStreams struct {
	conn   httpstream.Connection
	nextID int
	mu     sync.Mutex
}

func newForwarder(c *cluster) *forwarder {
	return &forwarder{c: c, conns: map[string]*podStreams{}}
}

// dialTimeout bounds the upgrade of a new port-forward connection.
const dialTimeout = 15 * time.Second

// Dial opens a connection to port of pod, as seen from inside the pod
// (its loopback included).
func (f *forwarder) Dial(ctx context.Context, pod string, port int) (net.Conn, error) {
	ps, err := f.streams(ctx, pod)
	if err != nil {
		return nil, err
	}
	conn, err := ps.dial(port)
	if err != nil {
		// The connection broke (the pod went away, the API server
		// restarted): drop it, and try once on a fresh one.
		f.drop(pod, ps)
		if ps, err = f.streams(ctx, pod); err != nil {
			return nil, err
		}
		conn, err = ps.dial(port)
	}
	if err != nil {
		f.drop(pod, ps)
		return nil, fmt.Errorf("port-forward to pod %s port %d: %w", pod, port, err)
	}
	return conn, nil
}

// streams returns the port-forward connection to pod, upgrading a new one
// when there is none or the last one closed.
func (f *forwarder) streams(ctx context.Context, pod string) (*podStreams, error) {
	f.mu.Lock()
	if f.done {
		f.mu.Unlock()
		return nil, net.ErrClosed
	}
	if ps, ok := f.conns[pod]; ok {
		select {
		case <-ps.conn.CloseChan():
			delete(f.conns, pod)
		default:
			f.mu.Unlock()
			return ps, nil
		}
	}
	f.mu.Unlock()

	type result struct {
		conn httpstream.Connection
		err  error
	}
	ch := make(chan result, 1)
	go func() {
		conn, err := f.upgrade(pod)
		ch <- result{conn, err}
	}()
	var r result
	select {
	case r = <-ch:
	case <-ctx.Done():
		go func() {
			if r := <-ch; r.conn != nil {
				r.conn.Close()
			}
		}()
		return nil, ctx.Err()
	case <-time.After(dialTimeout):
		go func() {
			if r := <-ch; r.conn != nil {
				r.conn.Close()
			}
		}()
		return nil, fmt.Errorf("port-forward to pod %s: no upgrade within %s", pod, dialTimeout)
	}
	if r.err != nil {
		return nil, fmt.Errorf("port-forward to pod %s: %w", pod, r.err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.done {
		r.conn.Close()
		return nil, net.ErrClosed
	}
	if ps, ok := f.conns[pod]; ok {
		// Another dial upgraded meanwhile: use one connection.
		r.conn.Close()
		return ps, nil
	}
	ps := &podStreams{conn: r.conn}
	f.conns[pod] = ps
	return ps, nil
}

// upgrade opens the port-forward connection to pod: WebSocket first, SPDY
// when the API server does not upgrade to it (as kubectl 1.31+ does).
func (f *forwarder) upgrade(pod string) (httpstream.Connection, error) {
	u := f.c.client.CoreV1().RESTClient().Post().Resource("pods").Namespace(f.c.namespace).Name(pod).SubResource("portforward").URL()
	ws, err := portforward.NewSPDYOverWebsocketDialer(u, f.c.rest)
	if err != nil {
		return nil, err
	}
	tr, upgrader, err := spdy.RoundTripperFor(f.c.rest)
	if err != nil {
		return nil, err
	}
	sp := spdy.NewDialer(upgrader, &http.Client{Transport: tr}, http.MethodPost, u)
	d := portforward.NewFallbackDialer(ws, sp, func(err error) bool {
		return httpstream.IsUpgradeFailure(err) || httpstream.IsHTTPSProxyError(err)
	})
	conn, proto, err := d.Dial(portforward.PortForwardProtocolV1Name)
	if err != nil {
		return nil, err
	}
	if proto != portforward.PortForwardProtocolV1Name {
		conn.Close()
		return nil, fmt.Errorf("the API server speaks %q, not %s", proto, portforward.PortForwardProtocolV1Name)
	}
	return conn, nil
}

func (f *forwarder) drop(pod string, ps *podStreams) {
	f.mu.Lock()
	if f.conns[pod] == ps {
		delete(f.conns, pod)
	}
	f.mu.Unlock()
	ps.conn.Close()
}

// Close closes every port-forward connection; dials fail from then on.
func (f *forwarder) Close() {
	f.mu.Lock()
	f.done = true
	conns := f.conns
	f.conns = map[string]*podStreams{}
	f.mu.Unlock()
	for _, ps := range conns {
		ps.conn.Close()
	}
}

// dial opens the error and data streams of one forwarded connection to
// port (the protocol kubectl's PortForwarder speaks).
func (ps *podStreams) dial(port int) (net.Conn, error) {
	ps.mu.Lock()
	id := ps.nextID
	ps.nextID++
	ps.mu.Unlock()
	h := http.Header{}
	h.Set(corev1.StreamType, corev1.StreamTypeError)
	h.Set(corev1.PortHeader, strconv.Itoa(port))
	h.Set(corev1.PortForwardRequestIDHeader, strconv.Itoa(id))
	errStream, err := ps.conn.CreateStream(h)
	if err != nil {
		return nil, err
	}
	// Nothing is written to the error stream.
	errStream.Close()
	h.Set(corev1.StreamType, corev1.StreamTypeData)
	data, err := ps.conn.CreateStream(h)
	if err != nil {
		ps.conn.RemoveStreams(errStream)
		return nil, err
	}
	c := &streamConn{ps: ps, data: data, errStream: errStream, port: port, errDone: make(chan struct{})}
	go c.readErrors()
	return c, nil
}

// A streamConn is one forwarded connection: reads and writes go to its data
// stream; the far side's error (nothing listens on the port, say) arrives
// on the error stream and ends it.
type streamConn struct {
	ps        *podStreams
	data      httpstream.Stream
	errStream httpstream.Stream
	port      int

	errDone   chan struct{}
	remoteErr error // set before errDone closes
	closeOnce sync.Once
}

func (c *streamConn) readErrors() {
	msg, err := io.ReadAll(c.errStream)
	switch {
	case len(msg) > 0:
		c.remoteErr = fmt.Errorf("port-forward: %s", msg)
	case err != nil:
		c.remoteErr = fmt.Errorf("port-forward error stream: %w", err)
	}
	close(c.errDone)
	if c.remoteErr != nil {
		_ = c.data.Reset()
	}
}

// Read reads from the data stream; once the far side reported an error,
// that error.
func (c *streamConn) Read(p []byte) (int, error) {
	n, err := c.data.Read(p)
	if err != nil {
		select {
		case <-c.errDone:
			if c.remoteErr != nil {
				return n, c.remoteErr
			}
		default:
		}
	}
	return n, err
}

// Write writes to the data stream.
func (c *streamConn) Write(p []byte) (int, error) { return c.data.Write(p) }

// Close resets both streams and forgets them.
func (c *streamConn) Close() error {
	c.closeOnce.Do(func() {
		_ = c.data.Reset()
		_ = c.errStream.Reset()
		c.ps.conn.RemoveStreams(c.data, c.errStream)
	})
	return nil
}

// LocalAddr and RemoteAddr are placeholders: a stream has no addresses.
func (c *streamConn) LocalAddr() net.Addr { return streamAddr("local") }

// RemoteAddr names the pod's port.
func (c *streamConn) RemoteAddr() net.Addr { return streamAddr("pod:" + strconv.Itoa(c.port)) }

// SetDeadline and friends are not supported by streams; http.Transport
// closes a connection whose request is canceled instead.
func (c *streamConn) SetDeadline(time.Time) error { return errNoDeadlines }

// SetReadDeadline is not supported (SetDeadline).
func (c *streamConn) SetReadDeadline(time.Time) error { return errNoDeadlines }

// SetWriteDeadline is not supported (SetDeadline).
func (c *streamConn) SetWriteDeadline(time.Time) error { return errNoDeadlines }

var errNoDeadlines = errors.New("port-forward streams have no deadlines")

type streamAddr string

func (a streamAddr) Network() string { return "port-forward" }
func (a streamAddr) String() string  { return string(a) }
