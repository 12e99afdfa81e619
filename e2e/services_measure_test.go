package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"hoist/e2e/testenv"
)

// wrkResult is what one wrk run measured.
type wrkResult struct {
	p50, p99 time.Duration
	rps      float64
	errors   string // wrk's non-2xx/socket error lines, if any
}

var (
	wrkPercentile = regexp.MustCompile(`(?m)^\s+(50|99)(?:\.0+)?%\s+(\S+)\s*$`) // wrk pads "1.04s " to the width of "1.04ms"
	wrkRPS        = regexp.MustCompile(`(?m)^Requests/sec:\s+(\S+)$`)
	wrkErrors     = regexp.MustCompile(`(?m)^\s*(Non-2xx or 3xx responses|Socket errors).*$`)
)

// runWrk loads url with wrk (2 threads, 16 connections, for d) and reads
// its latency percentiles and throughput; host, when set, is the Host
// header sent.
func runWrk(t testing.TB, url, token string, d time.Duration, host ...string) wrkResult {
	t.Helper()
	return runWrkConns(t, 16, url, token, d, host...)
}

// runWrkConns is runWrk with conns connections.
func runWrkConns(t testing.TB, conns int, url, token string, d time.Duration, host ...string) wrkResult {
	t.Helper()
	args := []string{"-t2", "-c" + strconv.Itoa(conns), "-d" + strconv.Itoa(int(d/time.Second)) + "s", "--latency"}
	if token != "" {
		args = append(args, "-H", "Authorization: Bearer "+token)
	}
	for _, h := range host {
		args = append(args, "-H", "Host: "+h)
	}
	out, err := exec.Command("wrk", append(args, url)...).CombinedOutput()
	if err != nil {
		t.Fatalf("wrk %s: %v\n%s", url, err, out)
	}
	var res wrkResult
	for _, m := range wrkPercentile.FindAllStringSubmatch(string(out), -1) {
		v, err := time.ParseDuration(m[2])
		if err != nil {
			t.Fatalf("wrk latency %q: %v", m[2], err)
		}
		if m[1] == "50" {
			res.p50 = v
		} else {
			res.p99 = v
		}
	}
	m := wrkRPS.FindStringSubmatch(string(out))
	if m == nil || res.p50 == 0 || res.p99 == 0 {
		t.Fatalf("wrk output without latency or Requests/sec:\n%s", out)
	}
	res.rps, _ = strconv.ParseFloat(m[1], 64)
	res.errors = strings.Join(wrkErrors.FindAllString(string(out), -1), "; ")
	return res
}

// TestMeasure_proxy loads a busybox httpd service with wrk through hoist's
// proxy (with a token), through a gateway on the local backend (plain
// HTTP, `certificate: null`, with a token) and directly at the replica's
// port on loopback, and prints the latency each adds (p50, p99) and the
// throughput ratios. Set HOIST_MEASURE=1 to run it; it needs wrk (Debian's package);
// HOIST_MEASURE_SECONDS sets each load's length (default 10).
func TestMeasure_proxy(t *testing.T) {
	if os.Getenv("HOIST_MEASURE") == "" {
		t.Skip("measurement: set HOIST_MEASURE=1")
	}
	if _, err := exec.LookPath("wrk"); err != nil {
		t.Fatal("measure:proxy needs wrk (apt-get install wrk)")
	}
	d := 10 * time.Second
	if v, err := strconv.Atoi(os.Getenv("HOIST_MEASURE_SECONDS")); err == nil && v > 0 {
		d = time.Duration(v) * time.Second
	}
	pb := startProxyBench(t)
	s, direct, gw := pb.s, pb.direct, pb.gateway
	// Warm both paths (connections, the page cache), then measure.
	runWrk(t, direct, "", time.Second)
	runWrk(t, s.url+"/proxy/services/main/bench/", s.token, time.Second)
	runWrk(t, gw, s.token, time.Second, "bench.hoist.test")
	dr := runWrk(t, direct, "", d)
	pr := runWrk(t, s.url+"/proxy/services/main/bench/", s.token, d)
	gr := runWrk(t, gw, s.token, d, "bench.hoist.test")
	if dr.errors != "" || pr.errors != "" || gr.errors != "" {
		// busybox httpd forks per request and drops some under load; the
		// figures say so rather than fail.
		t.Logf("errors under load: direct %q; proxy %q; gateway %q", dr.errors, pr.errors, gr.errors)
	}
	t.Logf("wrk -t2 -c16 -d%v, busybox httpd on loopback:", d)
	t.Logf("  direct:  p50 %v p99 %v, %.0f req/s", dr.p50, dr.p99, dr.rps)
	t.Logf("  proxy:   p50 %v p99 %v, %.0f req/s", pr.p50, pr.p99, pr.rps)
	t.Logf("  gateway: p50 %v p99 %v, %.0f req/s", gr.p50, gr.p99, gr.rps)
	t.Logf("  proxy added: p50 %v p99 %v; throughput ratio proxy/direct %.2f", pr.p50-dr.p50, pr.p99-dr.p99, pr.rps/dr.rps)
	t.Logf("  gateway added: p50 %v p99 %v; throughput ratio gateway/direct %.2f", gr.p50-dr.p50, gr.p99-dr.p99, gr.rps/dr.rps)
}

// proxyBench is a busybox httpd service on the local backend, running, with
// a gateway (plain HTTP) of hoist.test on loopback.
type proxyBench struct {
	s       *server
	direct  string // the replica's published port on loopback
	gateway string // the gateway's address; Host bench.hoist.test names the service
}

// startProxyBench starts hoist serve with the service and its gateway and
// waits until the service answers through the proxy and the gateway.
func startProxyBench(t testing.TB) proxyBench {
	t.Helper()
	const gwIP = "127.0.61.2"
	gwPort := freePortOn(t, gwIP)
	cfg := filepath.Join(t.TempDir(), "server.yml")
	writeTestFile(t, cfg, fmt.Sprintf("backends:\n  - type: local\n    gateway_address: %s\n    gateway_http_port: %d\n    gateway_https_port: %d\n",
		gwIP, gwPort, freePortOn(t, gwIP)))
	r := newRepo(t)
	r.write("gw.dstack.yml", "type: gateway\nname: gw\nbackend: local\nregion: local\ndomain: '*.hoist.test'\ndefault: true\ncertificate: null\n")
	r.write("bench.dstack.yml", fmt.Sprintf("type: service\nname: bench\nimage: %s\nport: 8000\nhttps: false\ncommands:\n"+
		"  - mkdir -p /www && echo hello > /www/index.html\n  - busybox httpd -f -p 8000 -h /www\n", testenv.BusyboxImage))
	rev := r.commit("bench service")
	s := startServer(t, r.dir, "--config", cfg, "--log-level", "info")
	t.Cleanup(func() { stopLocalGateways(t, s.dataDir) })
	s.waitRun("bench", rev, "running", 90*time.Second)
	c := gatewayClient(gwIP, nil)
	waitFor(t, 60*time.Second, func() string { return "the service to answer through the gateway" }, func() bool {
		code, _, _ := gatewayGet(c, fmt.Sprintf("http://bench.hoist.test:%d/", gwPort), s.token)
		return code == 200
	})
	waitFor(t, 60*time.Second, func() string { return "the service to answer through the proxy" }, func() bool {
		code, _ := s.proxyGet("/proxy/services/main/bench/", s.token)
		return code == 200
	})
	ids := s.containers()
	if len(ids) != 1 {
		t.Fatalf("%d containers, want the one replica", len(ids))
	}
	out, err := exec.Command("docker", "port", ids[0], "8000/tcp").Output()
	if err != nil {
		t.Fatalf("docker port: %v", err)
	}
	direct := strings.Fields(string(out))
	if len(direct) == 0 || !strings.HasPrefix(direct[0], "127.0.0.1:") {
		t.Fatalf("the replica's port is published at %q, want 127.0.0.1", out)
	}
	return proxyBench{s: s, direct: "http://" + direct[0] + "/", gateway: fmt.Sprintf("http://%s:%d/", gwIP, gwPort)}

}

// tableProxyConns is wrk's connections in BenchmarkTable_proxyP99: busybox
// httpd forks per connection and closes each (no keep-alive); with 16, on a
// loaded machine, p99 came out at about one second on both paths alike (the
// kernel's first SYN retransmission after a full accept backlog), which
// says nothing of either path.
const tableProxyConns = 4

// BenchmarkTable_proxyP99 loads the busybox httpd service with wrk (2
// threads, tableProxyConns connections, 10 s each) through /proxy/services with a token,
// and directly at the replica's published port as the reference, after a
// second's warm-up of each; it reports both p99 latencies. Run with
// -benchtime 1x; go tool task bench prints it in the table.
func BenchmarkTable_proxyP99(b *testing.B) {
	testenv.Require(b, "wrk")
	pb := startProxyBench(b)
	proxy := pb.s.url + "/proxy/services/main/bench/"
	runWrkConns(b, tableProxyConns, pb.direct, "", time.Second)
	runWrkConns(b, tableProxyConns, proxy, pb.s.token, time.Second)
	dr := runWrkConns(b, tableProxyConns, pb.direct, "", 10*time.Second)
	pr := runWrkConns(b, tableProxyConns, proxy, pb.s.token, 10*time.Second)
	if dr.errors != "" || pr.errors != "" {
		b.Logf("errors under load: direct %q; proxy %q", dr.errors, pr.errors)
	}
	b.ReportMetric(float64(pr.p99)/float64(time.Millisecond), "hoist-ms")
	b.ReportMetric(float64(dr.p99)/float64(time.Millisecond), "ref-ms")
}
