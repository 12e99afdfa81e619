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
// speaking kubectl port-forward's protocol but with no local listener: each
// dial upgrades a connection of its own and opens one pair of streams
// (error and data) on it; the data stream is the net.Conn. Nothing listens
// on this machine and nothing in the cluster is exposed.
//
// One upgraded connection per forwarded connection, not one per pod as
// kubectl keeps: a forwarded connection that fails at the far side (nothing
// listens on the port yet) leaves its upgraded connection unable to open
// new streams (measured on this project's cluster: the next streams got no
// reply until client-go's 30 s timeout), and it must not take others with
// it. An upgrade costs about 0.1 s; http.Transport keeps connections alive
// between requests, so few are made.
type forwarder struct {
	c *cluster

	mu    sync.Mutex
	open  map[*streamConn]struct{}
	done  bool
	reqID int
}

func newForwarder(c *cluster) *forwarder {
	return &forwarder{c: c, open: map[*streamConn]struct{}{}}
}

// dialTimeout bounds the upgrade of a port-forward connection and the
// creation of its streams.
const dialTimeout = 15 * time.Second

// Dial opens a connection to port of pod, as seen from inside the pod (its
// loopback included).
func (f *forwarder) Dial(ctx context.Context, pod string, port int) (net.Conn, error) {
	f.mu.Lock()
	if f.done {
		f.mu.Unlock()
		return nil, net.ErrClosed
	}
	f.reqID++
	id := f.reqID
	f.mu.Unlock()

	type result struct {
		conn *streamConn
		err  error
	}
	ch := make(chan result, 1)
	go func() {
		c, err := f.dial(pod, port, id)
		ch <- result{c, err}
	}()
	abandon := func() {
		go func() {
			if r := <-ch; r.conn != nil {
				r.conn.Close()
			}
		}()
	}
	var r result
	select {
	case r = <-ch:
	case <-ctx.Done():
		abandon()
		return nil, ctx.Err()
	case <-time.After(dialTimeout):
		abandon()
		return nil, fmt.Errorf("port-forward to pod %s port %d: no connection within %s", pod, port, dialTimeout)
	}
	if r.err != nil {
		return nil, fmt.Errorf("port-forward to pod %s port %d: %w", pod, port, r.err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.done {
		r.conn.Close()
		return nil, net.ErrClosed
	}
	f.open[r.conn] = struct{}{}
	r.conn.forget = func() {
		f.mu.Lock()
		delete(f.open, r.conn)
		f.mu.Unlock()
	}
	return r.conn, nil
}

// dial upgrades a port-forward connection to pod and opens the streams of
// one forwarded connection to port on it.
func (f *forwarder) dial(pod string, port, id int) (*streamConn, error) {
	conn, err := f.upgrade(pod)
	if err != nil {
		return nil, err
	}
	h := http.Header{}
	h.Set(corev1.StreamType, corev1.StreamTypeError)
	h.Set(corev1.PortHeader, strconv.Itoa(port))
	h.Set(corev1.PortForwardRequestIDHeader, strconv.Itoa(id))
	errStream, err := conn.CreateStream(h)
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("error stream: %w", err)
	}
	// Nothing is written to the error stream.
	errStream.Close()
	h.Set(corev1.StreamType, corev1.StreamTypeData)
	data, err := conn.CreateStream(h)
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("data stream: %w", err)
	}
	c := &streamConn{conn: conn, data: data, errStream: errStream, port: port, errDone: make(chan struct{})}
	go c.readErrors()
	return c, nil
}

// upgrade opens a port-forward connection to pod: WebSocket first, SPDY
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

// Close closes every forwarded connection; dials fail from then on.
func (f *forwarder) Close() {
	f.mu.Lock()
	f.done = true
	open := f.open
	f.open = map[*streamConn]struct{}{}
	f.mu.Unlock()
	for c := range open {
		c.Close()
	}
}

// A streamConn is one forwarded connection: reads and writes go to its data
// stream; the far side's error (nothing listens on the port, say) arrives
// on the error stream and ends it. Closing it closes its upgraded
// connection.
type streamConn struct {
	conn      httpstream.Connection
	data      httpstream.Stream
	errStream httpstream.Stream
	port      int
	forget    func() // set by Dial: drops it from the forwarder

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

// Close resets the streams and closes the upgraded connection.
func (c *streamConn) Close() error {
	c.closeOnce.Do(func() {
		_ = c.data.Reset()
		_ = c.errStream.Reset()
		c.conn.Close()
		if c.forget != nil {
			c.forget()
		}
	})
	return nil
}

// LocalAddr is a placeholder: a stream has no address.
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
