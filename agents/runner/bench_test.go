package runner_test

import (
	"bufio"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"hoist/agents/api"
	"hoist/agents/runner"
)

// BenchmarkRunner_logThroughput measures job output → runner → client on
// loopback without Docker: the job cats ~97 MB of numbered lines and the
// client follows until the log ends. Run it with -bench . -benchtime 3x.
func BenchmarkRunner_logThroughput(b *testing.B) {
	dir := b.TempDir()
	path := filepath.Join(dir, "numbers.txt")
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	w := bufio.NewWriterSize(f, 1<<20)
	var buf []byte
	for i := 1; i <= 12_000_000; i++ {
		buf = strconv.AppendInt(buf[:0], int64(i), 10)
		buf = append(buf, '\n')
		_, _ = w.Write(buf)
	}
	if err := w.Flush(); err != nil {
		b.Fatal(err)
	}
	fi, _ := f.Stat()
	f.Close()
	size := fi.Size()
	var rates []float64
	for b.Loop() {
		c, _, wd := newRunnerWith(b, runner.Config{Home: b.TempDir()})
		if err := c.Submit(b.Context(), api.JobSpec{Commands: []string{"cat " + path}, WorkingDir: wd}); err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		if _, err := c.Run(b.Context()); err != nil {
			b.Fatal(err)
		}
		var got int64
		if err := c.Follow(b.Context(), 0, func(l api.LogLine) error { got += int64(len(l.Data)); return nil }); err != nil {
			b.Fatal(err)
		}
		rates = append(rates, float64(got)/time.Since(start).Seconds()/1e6)
		if got != size {
			b.Fatalf("got %d bytes, want %d", got, size)
		}
	}
	b.SetBytes(size)
	best := 0.0
	for _, r := range rates {
		best = max(best, r)
	}
	b.ReportMetric(best, "best-MB/s")
}

// BenchmarkSSH_connect measures one SSH connection to a running job over
// the runner's Unix socket: the HTTP upgrade, key exchange and public-key
// authentication, then a session running `true` to its exit status.
func BenchmarkSSH_connect(b *testing.B) {
	key, line := userKey(b)
	c, _ := sshRunner(b, runner.Config{})
	startJob(b, c, api.JobSpec{AuthorizedKeys: []string{line}, WorkingDir: b.TempDir()})
	var connect, session time.Duration
	for b.Loop() {
		start := time.Now()
		client := mustDial(b, c, key, "")
		connect += time.Since(start)
		start = time.Now()
		if _, _, err := output(b, client, "true", nil); err != nil {
			b.Fatal(err)
		}
		session += time.Since(start)
		client.Close()
	}
	b.ReportMetric(float64(connect.Microseconds())/float64(b.N)/1000, "connect-ms")
	b.ReportMetric(float64(session.Microseconds())/float64(b.N)/1000, "exec-true-ms")
}

// BenchmarkSSH_forwardThroughput measures a direct-tcpip channel (port
// forwarding) reading 256 MiB from a loopback service.
func BenchmarkSSH_forwardThroughput(b *testing.B) {
	const size = 256 << 20
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	go func() {
		chunk := make([]byte, 1<<20)
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer conn.Close()
				for range size / len(chunk) {
					if _, err := conn.Write(chunk); err != nil {
						return
					}
				}
			}()
		}
	}()
	key, line := userKey(b)
	c, _ := sshRunner(b, runner.Config{})
	startJob(b, c, api.JobSpec{AuthorizedKeys: []string{line}, WorkingDir: b.TempDir()})
	client := mustDial(b, c, key, "")
	b.SetBytes(size)
	for b.Loop() {
		conn, err := client.Dial("tcp", ln.Addr().String())
		if err != nil {
			b.Fatal(err)
		}
		n, err := io.Copy(io.Discard, conn)
		conn.Close()
		if err != nil || n != size {
			b.Fatalf("read %d bytes, %v; want %d", n, err, size)
		}
	}
}
