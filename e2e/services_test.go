package e2e

import (
	"bufio"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"

	"hoist/e2e/testenv"
)

// proxyGet calls a path of hoist's service proxy with the bearer token tok
// (none when empty) and returns the status and body; status 0 when the
// request failed.
func (s *server) proxyGet(path, tok string) (int, string) {
	s.t.Helper()
	req, err := http.NewRequest("GET", s.url+path, nil)
	if err != nil {
		s.t.Fatal(err)
	}
	if tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	c := &http.Client{Timeout: 30 * time.Second}
	resp, err := c.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// containers returns the ids of the running containers of the server's
// installation.
func (s *server) containers() []string {
	s.t.Helper()
	out, err := exec.Command("docker", "ps", "-q", "--filter", "label=hoist.installation="+s.install).Output()
	if err != nil {
		s.t.Fatalf("docker ps: %v", err)
	}
	return strings.Fields(string(out))
}

// probedService is a busybox httpd service whose probe asks for /ready,
// which its replica does not serve until the test creates it.
func probedService(name, extra string) string {
	return fmt.Sprintf("type: service\nname: %s\nimage: %s\nport: 8000\n%scommands:\n"+
		"  - mkdir -p /www && echo hello from %s > /www/index.html\n  - busybox httpd -f -p 8000 -h /www\n"+
		"probes:\n  - type: http\n    url: /ready\n    interval: 1s\n    ready_after: 1\n", name, testenv.BusyboxImage, extra, name)
}

// TestServiceProxy_tokenAuthAndProbeRouting: a busybox httpd service is
// reachable through hoist's proxy at its URL with a hoist token and
// refused without one; its replica gets traffic only while its probe
// passes: taken out when the probe fails, put back when it passes again.
// A service with `auth: false` answers anyone.
func TestServiceProxy_tokenAuthAndProbeRouting(t *testing.T) {
	r := newRepo(t)
	r.write("web.dstack.yml", probedService("web", ""))
	r.write("open.dstack.yml", fmt.Sprintf("type: service\nname: open\nimage: %s\nport: 8000\nauth: false\ncommands:\n"+
		"  - mkdir -p /www && echo open to all > /www/index.html\n  - busybox httpd -f -p 8000 -h /www\n", testenv.BusyboxImage))
	rev := r.commit("two services")
	s := startServer(t, r.dir, "--resync-interval", "2s")
	s.waitRun("web", rev, "running", 90*time.Second)
	s.waitRun("open", rev, "running", 90*time.Second)

	var run struct {
		ServiceURL string `json:"service_url"`
	}
	s.getJSON("/api/v1/runs/web", &run)
	if run.ServiceURL != "/proxy/services/main/web/" {
		t.Fatalf("service_url = %q, want /proxy/services/main/web/", run.ServiceURL)
	}

	// The public service answers anyone.
	waitFor(t, 60*time.Second, func() string { return "the open service to answer without a token" }, func() bool {
		code, body := s.proxyGet("/proxy/services/main/open/", "")
		return code == 200 && strings.Contains(body, "open to all")
	})

	// web's replica runs but fails its probe: no traffic (503), with or
	// without a token the answer never comes from the replica.
	time.Sleep(3 * time.Second) // several probe intervals
	if code, body := s.proxyGet("/proxy/services/main/web/", s.token); code != http.StatusServiceUnavailable {
		t.Fatalf("replica failing its probe: got %d %q, want 503", code, body)
	}
	if code, _ := s.proxyGet("/proxy/services/main/web/", ""); code != http.StatusUnauthorized {
		t.Fatalf("without a token: got %d, want 401", code)
	}

	// The probe passes once /ready exists: the replica gets traffic.
	var web string
	for _, id := range s.containers() {
		out, _ := exec.Command("docker", "exec", id, "cat", "/www/index.html").CombinedOutput()
		if strings.Contains(string(out), "hello from web") {
			web = id
		}
	}
	if web == "" {
		t.Fatal("no container serves web")
	}
	if out, err := exec.Command("docker", "exec", web, "touch", "/www/ready").CombinedOutput(); err != nil {
		t.Fatalf("docker exec: %v: %s", err, out)
	}
	waitFor(t, 30*time.Second, func() string { return "web's replica to get traffic once its probe passes" }, func() bool {
		code, body := s.proxyGet("/proxy/services/main/web/", s.token)
		return code == 200 && strings.Contains(body, "hello from web")
	})
	for _, tc := range []struct {
		name, tok string
		code      int
	}{
		{name: "no token", tok: "", code: http.StatusUnauthorized},
		{name: "a wrong token", tok: "not-a-hoist-token", code: http.StatusUnauthorized},
		{name: "the admin token", tok: s.token, code: http.StatusOK},
	} {
		if code, body := s.proxyGet("/proxy/services/main/web/index.html", tc.tok); code != tc.code {
			t.Fatalf("%s: got %d %q, want %d", tc.name, code, body, tc.code)
		}
	}

	// The probe fails again: the replica is taken out.
	if out, err := exec.Command("docker", "exec", web, "rm", "/www/ready").CombinedOutput(); err != nil {
		t.Fatalf("docker exec: %v: %s", err, out)
	}
	waitFor(t, 30*time.Second, func() string { return "web's replica to be taken out once its probe fails" }, func() bool {
		code, _ := s.proxyGet("/proxy/services/main/web/", s.token)
		return code == http.StatusServiceUnavailable
	})
}

// TestServiceProxy_scalesFromZeroOnTheFirstRequest: a service with
// `replicas: 0..2` runs no replica until a request comes; the proxy holds
// that request while hoist starts one, then serves it; after
// scale_down_delay without requests the service is back to no replica.
func TestServiceProxy_scalesFromZeroOnTheFirstRequest(t *testing.T) {
	t.Parallel() // mostly waits: runs beside the other slow tests (harness_test.go)
	r := newRepo(t)
	r.write("zero.dstack.yml", fmt.Sprintf("type: service\nname: zero\nimage: %s\nport: 8000\nauth: false\n"+
		"replicas: 0..2\nscaling:\n  metric: rps\n  target: 100\n  scale_up_delay: 0s\n  scale_down_delay: 10s\ncommands:\n"+
		"  - mkdir -p /www && echo woken > /www/index.html\n  - busybox httpd -f -p 8000 -h /www\n"+
		"probes:\n  - type: http\n    url: /\n    interval: 1s\n    ready_after: 1\n", testenv.BusyboxImage))
	rev := r.commit("a service scaled to zero")
	s := startServer(t, r.dir, "--resync-interval", "2s")
	s.waitRun("zero", rev, "running", 60*time.Second)
	time.Sleep(3 * time.Second) // a few reconciles: still no replica
	if ids := s.containers(); len(ids) != 0 {
		t.Fatalf("a service with replicas 0..2 and no request runs %d containers", len(ids))
	}

	start := time.Now()
	code, body := s.proxyGet("/proxy/services/main/zero/", "")
	took := time.Since(start)
	if code != 200 || !strings.Contains(body, "woken") {
		t.Fatalf("the first request: %d %q after %v, want the replica's page", code, body, took)
	}
	t.Logf("scale from zero: first request answered after %v", took.Round(time.Millisecond))

	waitFor(t, 90*time.Second, func() string {
		return fmt.Sprintf("the service to scale back to zero (%d containers)", len(s.containers()))
	}, func() bool { return len(s.containers()) == 0 })
}

// fakeChat is a CGI script for busybox httpd: an OpenAI-compatible chat
// completion that streams two chunks a second apart, then [DONE].
const fakeChat = "#!/bin/sh\nprintf 'Content-Type: text/event-stream\\r\\n\\r\\n'\n" +
	"printf 'data: {\"object\":\"chat.completion.chunk\",\"choices\":[{\"delta\":{\"content\":\"hel\"}}]}\\n\\n'\n" +
	"sleep 2\n" +
	"printf 'data: {\"object\":\"chat.completion.chunk\",\"choices\":[{\"delta\":{\"content\":\"lo\"}}]}\\n\\n'\n" +
	"printf 'data: [DONE]\\n\\n'\n"

// TestServiceProxy_modelEndpointStreamsAChatCompletion: a service with
// `model: {format: openai, prefix: /cgi-bin}` whose replica is a fake
// OpenAI-compatible server (busybox httpd running a CGI script) is listed
// at /proxy/models/main/models, and a streamed chat completion through
// /proxy/models/main/chat/completions arrives as a stream: the first
// chunk before the replica wrote the last, ending in data: [DONE].
func TestServiceProxy_modelEndpointStreamsAChatCompletion(t *testing.T) {
	script := base64.StdEncoding.EncodeToString([]byte(fakeChat))
	r := newRepo(t)
	r.write("llm.dstack.yml", fmt.Sprintf("type: service\nname: llm\nimage: %s\nport: 8000\n"+
		"model:\n  type: chat\n  name: fake-llm\n  format: openai\n  prefix: /cgi-bin\ncommands:\n"+
		"  - mkdir -p /www/cgi-bin/chat\n  - echo %s | base64 -d > /www/cgi-bin/chat/completions\n"+
		"  - chmod +x /www/cgi-bin/chat/completions\n  - busybox httpd -f -p 8000 -h /www\n", testenv.BusyboxImage, script))
	rev := r.commit("a model service")
	s := startServer(t, r.dir, "--resync-interval", "2s")
	s.waitRun("llm", rev, "running", 90*time.Second)

	if code, _ := s.proxyGet("/proxy/models/main/models", ""); code != http.StatusUnauthorized {
		t.Fatalf("models without a token: %d, want 401", code)
	}
	code, body := s.proxyGet("/proxy/models/main/models", s.token)
	if code != 200 || !strings.Contains(body, `"id":"fake-llm"`) {
		t.Fatalf("models: %d %q, want fake-llm listed", code, body)
	}

	chat := `{"model": "fake-llm", "stream": true, "messages": [{"role": "user", "content": "hi"}]}`
	var first time.Duration
	var events []string
	waitFor(t, 60*time.Second, func() string { return fmt.Sprintf("a streamed chat completion (got %q)", events) }, func() bool {
		req, _ := http.NewRequest("POST", s.url+"/proxy/models/main/chat/completions", strings.NewReader(chat))
		req.Header.Set("Authorization", "Bearer "+s.token)
		req.Header.Set("Content-Type", "application/json")
		start := time.Now()
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		if resp.StatusCode != 200 {
			return false
		}
		events, first = nil, 0
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if l := sc.Text(); strings.HasPrefix(l, "data: ") {
				if first == 0 {
					first = time.Since(start)
				}
				events = append(events, l)
			}
		}
		return len(events) == 3 && events[2] == "data: [DONE]" && strings.Contains(events[0], `"content":"hel"`)
	})
	if first >= 2*time.Second {
		t.Fatalf("the first chunk arrived after %v: the answer was not streamed (the replica waits 2 s before the second)", first)
	}
	t.Logf("chat completion: first chunk after %v", first.Round(time.Millisecond))
}

// TestServiceProxy_rollingDeploymentKeepsAnswering: requests in a loop
// through the proxy to a two-replica service all succeed while a new
// revision rolls out, and traffic moves to the new replicas.
func TestServiceProxy_rollingDeploymentKeepsAnswering(t *testing.T) {
	spec := func(page string) string {
		return fmt.Sprintf("type: service\nname: roll\nimage: %s\nport: 8000\nreplicas: 2\nauth: false\ncommands:\n"+
			"  - mkdir -p /www && echo %s > /www/index.html\n  - busybox httpd -f -p 8000 -h /www\n"+
			"probes:\n  - type: http\n    url: /\n    interval: 1s\n    ready_after: 2\n", testenv.BusyboxImage, page)
	}
	r := newRepo(t)
	r.write("roll.dstack.yml", spec("v1"))
	v1 := r.commit("roll v1")
	s := startServer(t, r.dir, "--resync-interval", "2s")
	s.waitRun("roll", v1, "running", 90*time.Second)
	waitFor(t, 60*time.Second, func() string { return "v1 to answer through the proxy" }, func() bool {
		code, body := s.proxyGet("/proxy/services/main/roll/", "")
		return code == 200 && strings.Contains(body, "v1")
	})

	r.write("roll.dstack.yml", spec("v2"))
	r.commit("roll v2")
	var n, failed int
	var last string
	deadline := time.Now().Add(120 * time.Second)
	for {
		code, body := s.proxyGet("/proxy/services/main/roll/", "")
		n++
		if code != 200 {
			failed++
			t.Errorf("request %d during the rollout: %d %q", n, code, body)
		}
		last = strings.TrimSpace(body)
		if last == "v2" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %d requests the proxy still answers %q, want v2", n, last)
		}
		time.Sleep(50 * time.Millisecond)
	}
	// The old run is retired once the new replicas are ready: requests
	// keep succeeding meanwhile and after.
	for i := 0; i < 20; i++ {
		code, body := s.proxyGet("/proxy/services/main/roll/", "")
		n++
		if code != 200 {
			failed++
			t.Errorf("request %d after the rollout: %d %q", n, code, body)
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("%d requests across the rollout, %d failed", n, failed)
}

// TestServiceProxy_loadScalesOneToTwoAndBack: a bounded loop of requests
// through the proxy on loopback raises a `replicas: 1..2` service's
// requests per second above its target: it gets a second replica; once the
// loop stops, it goes back to one.
func TestServiceProxy_loadScalesOneToTwoAndBack(t *testing.T) {
	t.Parallel() // mostly waits: runs beside the other slow tests (harness_test.go)
	r := newRepo(t)
	r.write("busy.dstack.yml", fmt.Sprintf("type: service\nname: busy\nimage: %s\nport: 8000\nauth: false\n"+
		"replicas: 1..2\nscaling:\n  metric: rps\n  target: 2\n  window: 30s\n  scale_up_delay: 0s\n  scale_down_delay: 5s\ncommands:\n"+
		"  - mkdir -p /www && echo busy > /www/index.html\n  - busybox httpd -f -p 8000 -h /www\n", testenv.BusyboxImage))
	rev := r.commit("a scaling service")
	s := startServer(t, r.dir, "--resync-interval", "2s")
	s.waitRun("busy", rev, "running", 90*time.Second)
	waitFor(t, 60*time.Second, func() string { return "one replica answering" }, func() bool {
		code, _ := s.proxyGet("/proxy/services/main/busy/", "")
		return code == 200 && len(s.containers()) == 1
	})

	// About 20 requests per second, 10 times the target, for at most a
	// minute.
	deadline := time.Now().Add(60 * time.Second)
	for len(s.containers()) < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("a minute of load did not bring a second replica")
		}
		for range 10 {
			if code, body := s.proxyGet("/proxy/services/main/busy/", ""); code != 200 {
				t.Fatalf("under load: %d %q", code, body)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	t.Logf("scaled to 2 replicas after %v of load", (60*time.Second - time.Until(deadline)).Round(time.Second))
	waitFor(t, 90*time.Second, func() string {
		return fmt.Sprintf("the service back to one replica without load (%d containers)", len(s.containers()))
	}, func() bool { return len(s.containers()) == 1 })
}
