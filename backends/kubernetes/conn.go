package kubernetes

import (
	"cmp"
	"context"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	"hoist/backends"
	"hoist/backends/internal/agentauth"
	"hoist/backends/internal/shimserver"
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
		Base:    &shimserver.InProcess{Host: shimHost, Handler: shimserver.Handler(s, podShimVersion), Next: tr},
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
