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
	closed := make(chan time.Time, 1)
	go func() { // the server closes the connection: the read ends
		_, _ = io.Copy(io.Discard, conn)
		closed <- time.Now()
	}()
	start := time.Now()
	// Headers one byte at a time, 50 ms apart: 15 s if nobody stops it.
	header := "GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: " + strings.Repeat("a", 300) + "\r\n\r\n"
	sent := 0
	for ; sent < len(header); sent++ {
		select {
		case at := <-closed:
			if d := at.Sub(start); d < readHeader {
				t.Errorf("cut off after %v, before the %v timeout", d, readHeader)
			}
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
