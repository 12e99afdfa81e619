package api

import (
	"context"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// UnixScheme prefixes an agent address that is a Unix socket on the
// instance: "unix:///path/to/runner.sock" (TaskInfo.RunnerAddr).
const UnixScheme = "unix://"

// unixHostSuffix ends the host name under which an HTTP request for a Unix
// socket travels: the socket's path in hex, then this suffix. Each socket
// gets a host of its own, so that http.Transport never reuses one socket's
// connection for another.
const unixHostSuffix = ".sock.hoist.invalid"

// UnixAddr returns the agent address of the Unix socket at path.
func UnixAddr(path string) string { return UnixScheme + path }

// SocketPath returns the socket path of a "unix://" agent address.
func SocketPath(addr string) (string, bool) {
	p, ok := strings.CutPrefix(addr, UnixScheme)
	return p, ok && strings.HasPrefix(p, "/")
}

// BaseURL returns the HTTP base URL of an agent address: "http://host:port"
// for host:port (or an http(s) URL, unchanged), and for a "unix://" address
// an http URL whose host names the socket; a transport whose DialContext is
// wrapped by UnixDial dials that socket for it.
func BaseURL(addr string) string {
	if p, ok := SocketPath(addr); ok {
		return "http://" + hex.EncodeToString([]byte(p)) + unixHostSuffix
	}
	if !strings.Contains(addr, "://") {
		addr = "http://" + addr
	}
	return strings.TrimRight(addr, "/")
}

// SocketOfHost returns the socket path a host:port of a BaseURL names, if
// it names one.
func SocketOfHost(hostport string) (string, bool) {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	enc, ok := strings.CutSuffix(host, unixHostSuffix)
	if !ok {
		return "", false
	}
	b, err := hex.DecodeString(enc)
	if err != nil || len(b) == 0 || b[0] != '/' {
		return "", false
	}
	return string(b), true
}

// DialFunc is the signature of http.Transport.DialContext.
type DialFunc func(ctx context.Context, network, addr string) (net.Conn, error)

// UnixDial wraps dial so that addresses of Unix sockets (see BaseURL) are
// dialed as network "unix" with the socket's path, and every other address
// as before. A nil dial dials on this machine.
func UnixDial(dial DialFunc) DialFunc {
	if dial == nil {
		dial = dialHere
	}
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		if p, ok := SocketOfHost(addr); ok {
			return dial(ctx, "unix", p)
		}
		return dial(ctx, network, addr)
	}
}

// maxSocketPath is the longest socket path connect(2) takes on Linux: sun_path
// holds 108 bytes with the terminating NUL (see unix(7)).
const maxSocketPath = 107

// dialHere dials addr on this machine. A Unix socket whose path is too long
// for connect(2) is reached through its directory, opened and named by its
// /proc/self/fd entry (see proc(5)).
func dialHere(ctx context.Context, network, addr string) (net.Conn, error) {
	var d net.Dialer
	if network != "unix" || len(addr) <= maxSocketPath {
		return d.DialContext(ctx, network, addr)
	}
	dir, err := os.Open(filepath.Dir(addr))
	if err != nil {
		return nil, fmt.Errorf("dial unix %s: %w", addr, err)
	}
	defer dir.Close()
	return d.DialContext(ctx, "unix", fmt.Sprintf("/proc/self/fd/%d/%s", dir.Fd(), filepath.Base(addr)))
}

// NewLocalTransport returns an http.Transport that dials agents on this
// machine, Unix sockets included.
func NewLocalTransport() *http.Transport {
	return &http.Transport{DialContext: UnixDial(nil), MaxIdleConnsPerHost: 8, IdleConnTimeout: 90 * time.Second, DisableCompression: true}
}
