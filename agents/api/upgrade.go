package api

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"
)

// dialUpgrade sends GET path with an Upgrade to protocol and, on 101
// Switching Protocols, returns the connection with the answer's
// HostKeyHeader. ctx bounds the handshake only.
func dialUpgrade(ctx context.Context, c *agentClient, path, protocol string, h http.Header) (net.Conn, string, error) {
	// The request's context must outlive the handshake: an http.Transport
	// may close the switched connection when it is cancelled.
	rctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	stop := context.AfterFunc(ctx, cancel)
	req, err := http.NewRequestWithContext(rctx, http.MethodGet, c.base+path, nil)
	if err != nil {
		cancel()
		return nil, "", fmt.Errorf("%s %s: %w", c.service, path, err)
	}
	for k, vs := range h {
		for _, v := range vs {
			req.Header.Add(k, v)
		}
	}
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", protocol)
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.hc.Do(req)
	if !stop() {
		err = errors.Join(err, ctx.Err())
	}
	if err != nil {
		if resp != nil {
			resp.Body.Close()
		}
		cancel()
		return nil, "", fmt.Errorf("%s %s: %w", c.service, path, err)
	}
	if err := c.checkVersion(resp); err != nil {
		resp.Body.Close()
		cancel()
		return nil, "", err
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		defer resp.Body.Close()
		defer cancel()
		return nil, "", fmt.Errorf("%s GET %s: %w", c.service, path, answerError(resp))
	}
	rwc, ok := resp.Body.(io.ReadWriteCloser)
	if !ok {
		resp.Body.Close()
		cancel()
		return nil, "", fmt.Errorf("%s GET %s: the switched connection is not writable", c.service, path)
	}
	return &UpgradedConn{rwc: rwc, done: cancel}, resp.Header.Get(HostKeyHeader), nil
}

// UpgradedConn is a connection taken over from HTTP by an Upgrade, as a
// net.Conn. It has no addresses of its own and no deadlines.
type UpgradedConn struct {
	rwc  io.ReadWriteCloser
	done func()
}

// NewUpgradedConn wraps rwc, the body of a 101 answer; done, if not nil,
// runs once rwc is closed.
func NewUpgradedConn(rwc io.ReadWriteCloser, done func()) *UpgradedConn {
	return &UpgradedConn{rwc: rwc, done: done}
}

// Read reads from the connection.
func (c *UpgradedConn) Read(p []byte) (int, error) { return c.rwc.Read(p) }

// Write writes to the connection.
func (c *UpgradedConn) Write(p []byte) (int, error) { return c.rwc.Write(p) }

// Close closes the connection.
func (c *UpgradedConn) Close() error {
	err := c.rwc.Close()
	if c.done != nil {
		c.done()
	}
	return err
}

// LocalAddr returns a placeholder address.
func (c *UpgradedConn) LocalAddr() net.Addr { return upgradeAddr{} }

// RemoteAddr returns a placeholder address.
func (c *UpgradedConn) RemoteAddr() net.Addr { return upgradeAddr{} }

// SetDeadline is not supported.
func (c *UpgradedConn) SetDeadline(time.Time) error { return errors.ErrUnsupported }

// SetReadDeadline is not supported.
func (c *UpgradedConn) SetReadDeadline(time.Time) error { return errors.ErrUnsupported }

// SetWriteDeadline is not supported.
func (c *UpgradedConn) SetWriteDeadline(time.Time) error { return errors.ErrUnsupported }

type upgradeAddr struct{}

func (upgradeAddr) Network() string { return "upgrade" }
func (upgradeAddr) String() string  { return "upgraded-http" }
