package kubernetes

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"time"

	"hoist/backends"
	"hoist/backends/internal/agentauth"
)

// shimHost is the host of the pod shim's URL: requests for it never leave
// the process.
const shimHost = "pod-shim.hoist.invalid"

// newConn returns the connection to the shim API of one instance: an HTTP
// client whose requests to the ShimURL are answered in this process by the
// pod shim, and whose requests to a runner address go through a
// port-forward to the runner in the task's pod.
func newConn(_ context.Context, c *cluster, rec instanceRecord) (backends.Conn, error) {
	s := newPodShim(c, rec, cmp.Or(c.unschedulableTimeout, DefaultUnschedulableTimeout))
	tr := &http.Transport{
		DialContext: func(ctx context.Context, _, addr string) (net.Conn, error) {
			pod, port, ok := podOfHost(addr)
			if !ok {
				return nil, fmt.Errorf("kubernetes: %s is no runner address of this cluster", addr)
			}
			return s.fwd.Dial(ctx, pod, port)
		},
		MaxIdleConnsPerHost: 4, IdleConnTimeout: 90 * time.Second, DisableCompression: true,
	}
	// The shim is in this process and wants no token; the runners do, and
	// agentauth adds each one's (from the task list) to its requests.
	token, err := agentauth.NewToken()
	if err != nil {
		return nil, err
	}
	url := "http://" + shimHost
	hc := &http.Client{Transport: &agentauth.Transport{
		Base:    &inProcess{host: shimHost, handler: s.Handler(), next: tr},
		ShimURL: url, Token: func() string { return token },
	}}
	s.runners = hc
	return &conn{shim: s, hc: hc, tr: tr, url: url}, nil
}

// A conn is the Conn of one instance of the cluster.
type conn struct {
	shim *podShim
	hc   *http.Client
	tr   *http.Transport
	url  string
	once sync.Once
}

// HTTPClient returns the client that reaches the pod shim and the runners.
func (c *conn) HTTPClient() *http.Client { return c.hc }

// ShimURL returns the pod shim's base URL.
func (c *conn) ShimURL() string { return c.url }

// Close stops the pod shim's background work and the port-forwards. The
// tasks' pods are left as they are.
func (c *conn) Close() error {
	c.once.Do(func() {
		c.shim.close()
		c.tr.CloseIdleConnections()
	})
	return nil
}

// inProcess is the RoundTripper that serves requests for host with handler,
// in this process, and sends every other request with next.
type inProcess struct {
	host    string
	handler http.Handler
	next    http.RoundTripper
}

// RoundTrip runs the handler for req and returns its answer as soon as the
// handler has written its header; the body streams through a pipe.
func (t *inProcess) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL.Host != t.host {
		return t.next.RoundTrip(req)
	}
	r := req.Clone(req.Context())
	r.RequestURI, r.RemoteAddr, r.Host = req.URL.RequestURI(), "in-process", t.host
	if r.Body == nil {
		r.Body = http.NoBody
	}
	pr, pw := io.Pipe()
	w := &pipeResponse{header: http.Header{}, body: pw, ready: make(chan struct{})}
	go func() {
		defer func() {
			w.WriteHeader(http.StatusOK) // the handler wrote nothing
			pw.Close()
		}()
		t.handler.ServeHTTP(w, r)
	}()
	select {
	case <-w.ready:
	case <-req.Context().Done():
		pr.CloseWithError(req.Context().Err())
		return nil, req.Context().Err()
	}
	return &http.Response{
		Status: fmt.Sprintf("%d %s", w.status, http.StatusText(w.status)), StatusCode: w.status,
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: w.sent, Body: pr, ContentLength: -1, Request: req,
	}, nil
}

// pipeResponse is the http.ResponseWriter of an in-process request.
type pipeResponse struct {
	header http.Header
	sent   http.Header // the header as written
	status int
	body   *io.PipeWriter
	ready  chan struct{}
	once   sync.Once
}

func (w *pipeResponse) Header() http.Header { return w.header }

func (w *pipeResponse) WriteHeader(status int) {
	w.once.Do(func() {
		w.status, w.sent = status, w.header.Clone()
		close(w.ready)
	})
}

func (w *pipeResponse) Write(b []byte) (int, error) {
	w.WriteHeader(http.StatusOK)
	return w.body.Write(b)
}
