package runner

import (
	"bufio"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strings"
)

// defaultGateway returns the gateway of the IPv4 default route in a
// /proc/net/route table (path), as the kernel lists it: hexadecimal, in the
// host's byte order (see proc(5), /proc/net/route).
func defaultGateway(path string) (net.IP, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("default gateway: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 3 || fields[1] != "00000000" {
			continue
		}
		b, err := hex.DecodeString(fields[2])
		if err != nil || len(b) != 4 {
			continue
		}
		ip := make(net.IP, 4)
		binary.BigEndian.PutUint32(ip, binary.LittleEndian.Uint32(b))
		if !ip.IsUnspecified() {
			return ip, nil
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("default gateway: %w", err)
	}
	return nil, fmt.Errorf("default gateway: %s has no IPv4 default route", path)
}

// peerListener accepts only connections from its gateway or from loopback:
// in a bridge-network container, Docker's published port arrives from the
// bridge's gateway, and every other container on the bridge comes from an
// address of its own. Refused connections are closed before a byte is read,
// and logged.
type peerListener struct {
	net.Listener
	gateway net.IP
	log     *slog.Logger
}

// Accept returns the next connection from an allowed peer.
func (l *peerListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if a, ok := c.RemoteAddr().(*net.TCPAddr); ok && (a.IP.IsLoopback() || a.IP.Equal(l.gateway)) {
			return c, nil
		}
		l.log.Warn("runner_connection_refused", "remote_addr", c.RemoteAddr().String())
		c.Close()
	}
}
