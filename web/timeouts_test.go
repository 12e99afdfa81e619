package web

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// timedFixture is a fixture whose test server is HTTPServer, with its
// timeouts.
func timedFixture(t *testing.T, to Timeouts) *fixture {
	t.Helper()
	f := newFixture(t, func(c *Config, _ *Deps) { c.Timeouts = to })
	f.ts.Close()
	ts := httptest.NewUnstartedServer(nil)
	ts.Config = f.srv.HTTPServer()
	ts.Start()
	t.Cleanup(ts.Close)
	f.ts = ts
	return f
}

func TestServer_slowLorisIsCutOffAtTheReadHeaderTimeout(t *testing.T) {
	const readHeader = 300 * time.Millisecond
	f := timedFixture(t, Timeouts{ReadHeader: readHeader})
	conn, err := net.Dial("tcp", f.ts.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	start := time.Now()
	closed := cutOff(conn)
	// Headers one byte at a time, 50 ms apart: 15 s if nobody stops it.
	header := "GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: " + strings.Repeat("a", 300) + "\r\n\r\n"
	sent := 0
	for ; sent < len(header); sent++ {
		select {
		case at := <-closed:
			t.Logf("cut off after %v and %d of %d header bytes", at.Sub(start), sent, len(header))
			return
		case <-time.After(50 * time.Millisecond):
		}
		if _, err := conn.Write([]byte{header[sent]}); err != nil {
			t.Logf("write failed after %v: %v", time.Since(start), err)
			return
		}
	}
	t.Fatalf("the server read %d header bytes over %v without cutting the client off", sent, time.Since(start))
}

// cutOff reports when the server closes conn, reading until it does.
func cutOff(conn net.Conn) <-chan time.Time {
	closed := make(chan time.Time, 1)
	go func() {
		_, _ = io.Copy(io.Discard, conn)
		closed <- time.Now()
	}()
	return closed
}

func TestServer_slowBodyIsCutOffAtTheReadTimeout(t *testing.T) {
	const read = 300 * time.Millisecond
	f := timedFixture(t, Timeouts{Read: read})
	conn, err := net.Dial("tcp", f.ts.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	start := time.Now()
	if _, err := io.WriteString(conn, "POST /login HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: 300\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	closed := cutOff(conn)
	for sent := 0; sent < 300; sent++ { // 15 s if nobody stops it
		select {
		case at := <-closed:
			t.Logf("cut off after %v and %d of 300 body bytes", at.Sub(start), sent)
			return
		case <-time.After(50 * time.Millisecond):
		}
		if _, err := conn.Write([]byte{'a'}); err != nil {
			return
		}
	}
	t.Fatalf("the server read a 300-byte body over %v without cutting the client off", time.Since(start))
}

func TestServer_idleConnectionIsClosedAtTheIdleTimeout(t *testing.T) {
	const idle = 300 * time.Millisecond
	f := timedFixture(t, Timeouts{Idle: idle})
	conn, err := net.Dial("tcp", f.ts.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := io.WriteString(conn, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("first request: %v, %v", resp, err)
	}
	resp.Body.Close()
	start := time.Now()
	select {
	case at := <-cutOff(conn):
		t.Logf("idle connection closed after %v", at.Sub(start))
	case <-time.After(15 * time.Second):
		t.Fatal("an idle keep-alive connection stayed open 15 s")
	}
}

func TestServer_liveStreamsOutlastTheReadAndWriteTimeouts(t *testing.T) {
	const short = 200 * time.Millisecond
	f := timedFixture(t, Timeouts{Read: short, Write: short})
	f.store.appendLog("job-3", "epoch 1")
	for _, path := range []string{"/runs/train/logs/stream", "/api/v1/runs/train/logs?follow=true"} {
		t.Run(path, func(t *testing.T) {
			r := f.do(t, "GET", path, adminTok, nil)
			br := bufio.NewReader(r.Body)
			waitFor := func(want string) {
				t.Helper()
				for {
					l, err := br.ReadString('\n')
					if err != nil {
						t.Fatalf("stream ended before %q: %v", want, err)
					}
					if strings.Contains(l, want) {
						return
					}
				}
			}
			waitFor("epoch 1")
			time.Sleep(3 * short) // past both timeouts
			f.store.appendLog("job-3", "epoch "+path)
			f.srv.NotifyLogs()
			waitFor("epoch " + path)
		})
	}
}

func TestServer_ordinaryRequestsKeepWorkingWithTimeouts(t *testing.T) {
	f := timedFixture(t, Timeouts{ReadHeader: time.Second, Read: time.Second, Write: time.Second, Idle: time.Second})
	for range 3 {
		if r := f.do(t, "GET", "/api/v1/runs", adminTok, nil); r.StatusCode != http.StatusOK {
			t.Fatalf("GET /api/v1/runs: %d", r.StatusCode)
		}
	}
}
