package web

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeServices is the reconciler's side of the proxy: services by name,
// and what Wake does.
type fakeServices struct {
	mu     sync.Mutex
	m      map[string]Service
	wakes  int
	onWake func(f *fakeServices)  // called with mu held
	urls   map[string]ServiceURLs // by project/run: served at a gateway
}

func (f *fakeServices) Service(_ context.Context, project, run string) (Service, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	s, ok := f.m[project+"/"+run]
	if !ok {
		return Service{}, fmt.Errorf("service %s/%s: %w", project, run, ErrNotFound)
	}
	return s, nil
}

func (f *fakeServices) Models(_ context.Context, project string) ([]Service, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []Service
	for _, s := range f.m {
		if s.Project == project && s.Model != nil {
			out = append(out, s)
		}
	}
	return out, nil
}

func (f *fakeServices) Wake(_ context.Context, project, run string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.wakes++
	if f.onWake != nil {
		f.onWake(f)
	}
	return nil
}

func (f *fakeServices) GatewayURLs(_ context.Context, project, run string) (ServiceURLs, bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	u, ok := f.urls[project+"/"+run]
	return u, ok, nil
}

func (f *fakeServices) set(s Service) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.m[s.Project+"/"+s.Run] = s
}

// upstream is a replica: it answers with its name, the path, query and
// headers it got.
func upstream(t *testing.T, name string) Replica {
	t.Helper()
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "%s %s %s auth=%q cookie=%q xff=%q prefix=%q",
			name, r.URL.Path, r.URL.RawQuery, r.Header.Get("Authorization"), r.Header.Get("Cookie"),
			r.Header.Get("X-Forwarded-For"), r.Header.Get("X-Forwarded-Prefix"))
	}))
	t.Cleanup(ts.Close)
	return Replica{JobID: name, Addr: ts.Listener.Addr().String(), Transport: ts.Client().Transport}
}

func proxyFixture(t *testing.T, svcs ...Service) (*fixture, *fakeServices) {
	t.Helper()
	fs := &fakeServices{m: map[string]Service{}}
	for _, s := range svcs {
		fs.set(s)
	}
	f := newFixture(t, func(c *Config, d *Deps) {
		d.Services = fs
		c.Proxy = ProxyLimits{Hold: 2 * time.Second, Queue: 1, Poll: 10 * time.Millisecond}
	})
	return f, fs
}

func TestProxy_authRequiresATokenAndNeverForwardsIt(t *testing.T) {
	rep := upstream(t, "r1")
	f, _ := proxyFixture(t,
		Service{Project: "main", Run: "private", Auth: true, StripPrefix: true, MinReplicas: 1, Replicas: []Replica{rep}},
		Service{Project: "main", Run: "public", Auth: false, StripPrefix: true, MinReplicas: 1, Replicas: []Replica{rep}},
		Service{Project: "beta", Run: "private", Auth: true, StripPrefix: true, MinReplicas: 1, Replicas: []Replica{rep}})
	for _, tc := range []struct {
		name, path, tok string
		code            int
		body            string
	}{
		{name: "no token is 401", path: "/proxy/services/main/private/", code: http.StatusUnauthorized},
		{name: "a wrong token is 401", path: "/proxy/services/main/private/", tok: "nope", code: http.StatusUnauthorized},
		{name: "a user token passes and is not forwarded", path: "/proxy/services/main/private/x", tok: userTok, code: 200, body: `r1 /x  auth=""`},
		{name: "a viewer token passes", path: "/proxy/services/main/private/x", tok: viewerTok, code: 200, body: `r1 /x  auth=""`},
		{name: "a public service needs none", path: "/proxy/services/main/public/x", code: 200, body: `r1 /x  auth=""`},
		{name: "a public service's own Authorization is forwarded", path: "/proxy/services/main/public/x", tok: "app-token", code: 200, body: `auth="Bearer app-token"`},
		{name: "another project's service is 404", path: "/proxy/services/other/private/", tok: userTok, code: http.StatusNotFound},
		{name: "an unknown run is 404", path: "/proxy/services/main/nothing/", tok: userTok, code: http.StatusNotFound},
		{name: "a token of no role in the service's project is 404", path: "/proxy/services/beta/private/x", tok: userTok, code: http.StatusNotFound, body: "project not found"},
		{name: "the admin token reaches every project's service", path: "/proxy/services/beta/private/x", tok: adminTok, code: 200, body: `r1 /x  auth=""`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := f.do(t, "GET", tc.path, tc.tok, nil, "Cookie", sessionCookie+"=s3cret; app=1")
			body := readBody(t, resp)
			if resp.StatusCode != tc.code || !strings.Contains(body, tc.body) {
				t.Fatalf("got %d %q, want %d containing %q", resp.StatusCode, body, tc.code, tc.body)
			}
			if strings.Contains(body, "s3cret") {
				t.Fatalf("hoist's session cookie reached the service: %q", body)
			}
		})
	}
}

func TestProxy_stripPrefixAndForwardedHeaders(t *testing.T) {
	rep := upstream(t, "r1")
	f, _ := proxyFixture(t,
		Service{Project: "main", Run: "strip", StripPrefix: true, MinReplicas: 1, Replicas: []Replica{rep}},
		Service{Project: "main", Run: "keep", StripPrefix: false, MinReplicas: 1, Replicas: []Replica{rep}})
	for _, tc := range []struct{ name, path, want string }{
		{name: "strip_prefix forwards the path below the run", path: "/proxy/services/main/strip/a/b?q=1",
			want: `r1 /a/b q=1 auth="" cookie="" xff="127.0.0.1" prefix="/proxy/services/main/strip"`},
		{name: "strip_prefix false forwards the whole path", path: "/proxy/services/main/keep/a/b?q=1",
			want: `r1 /proxy/services/main/keep/a/b q=1 auth="" cookie="" xff="127.0.0.1" prefix=""`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := f.do(t, "GET", tc.path, "", nil)
			if body := readBody(t, resp); body != tc.want {
				t.Fatalf("got %d %q, want %q", resp.StatusCode, body, tc.want)
			}
		})
	}
	resp := f.do(t, "POST", "/proxy/services/main/strip?q=1", "", nil)
	if resp.StatusCode != http.StatusPermanentRedirect || resp.Header.Get("Location") != "/proxy/services/main/strip/?q=1" {
		t.Fatalf("the run's URL without its slash: %d %q, want 308 to the slash", resp.StatusCode, resp.Header.Get("Location"))
	}
}

func TestProxy_roundRobinOverReadyReplicas(t *testing.T) {
	a, b := upstream(t, "a"), upstream(t, "b")
	f, _ := proxyFixture(t, Service{Project: "main", Run: "web", StripPrefix: true, MinReplicas: 1, Replicas: []Replica{b, a}})
	var got []string
	for range 4 {
		got = append(got, strings.Fields(readBody(t, f.do(t, "GET", "/proxy/services/main/web/", "", nil)))[0])
	}
	if strings.Join(got, "") != "abab" {
		t.Fatalf("replicas answered %v, want a b a b", got)
	}
}

// TestProxy_aGoneReplicaIsRetriedOnAnother: a GET picked for a replica
// that no longer answers (retired by a rolling deployment) is sent to
// another ready replica; a POST with a body is not sent twice.
func TestProxy_aGoneReplicaIsRetriedOnAnother(t *testing.T) {
	a := upstream(t, "a")
	gone := httptest.NewServer(http.NotFoundHandler())
	gone.Close() // nothing listens at its address any more
	dead := Replica{JobID: "dead", Addr: gone.Listener.Addr().String(), Transport: http.DefaultTransport}
	f, _ := proxyFixture(t, Service{Project: "main", Run: "web", StripPrefix: true, MinReplicas: 1, Replicas: []Replica{dead, a}})
	for i := range 4 {
		resp := f.do(t, "GET", "/proxy/services/main/web/", "", nil)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %d = %d, want 200 from the replica that answers", i, resp.StatusCode)
		}
		if got := strings.Fields(readBody(t, resp))[0]; got != "a" {
			t.Fatalf("GET %d reached %s, want a", i, got)
		}
	}
	codes := map[int]int{}
	for range 4 {
		codes[f.do(t, "POST", "/proxy/services/main/web/", "body", nil).StatusCode]++
	}
	if codes[http.StatusBadGateway] == 0 {
		t.Fatalf("POST answers %v, want a 502 when the dead replica is picked (never sent twice)", codes)
	}
}

func TestProxy_routeIsReusedForRouteTTL(t *testing.T) {
	a, b := upstream(t, "a"), upstream(t, "b")
	var mu sync.Mutex
	now := t0
	fs := &fakeServices{m: map[string]Service{}}
	fs.set(Service{Project: "main", Run: "web", MinReplicas: 1, Replicas: []Replica{a}})
	f := newFixture(t, func(c *Config, d *Deps) {
		d.Services = fs
		c.Now = func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	})
	who := func() string {
		return strings.Fields(readBody(t, f.do(t, "GET", "/proxy/services/main/web/", "", nil)))[0]
	}
	if got := who(); got != "a" {
		t.Fatalf("first request reached %s, want a", got)
	}
	fs.set(Service{Project: "main", Run: "web", MinReplicas: 1, Replicas: []Replica{b}}) // a is no longer ready
	if got := who(); got != "a" {
		t.Fatalf("within the route's TTL the request reached %s, want a (the cached route)", got)
	}
	mu.Lock()
	now = now.Add(1100 * time.Millisecond)
	mu.Unlock()
	if got := who(); got != "b" {
		t.Fatalf("after the route's TTL the request reached %s, want b", got)
	}
}

func TestProxy_noReadyReplica(t *testing.T) {
	rep := upstream(t, "r1")
	t.Run("a run with min replicas above zero is 503", func(t *testing.T) {
		f, fs := proxyFixture(t, Service{Project: "main", Run: "web", MinReplicas: 1})
		if resp := f.do(t, "GET", "/proxy/services/main/web/", "", nil); resp.StatusCode != http.StatusServiceUnavailable {
			t.Fatalf("got %d, want 503", resp.StatusCode)
		}
		if fs.wakes != 0 {
			t.Fatalf("woke a run that does not scale to zero")
		}
	})
	t.Run("a run scaled to zero is woken and the request held until a replica is ready", func(t *testing.T) {
		f, fs := proxyFixture(t, Service{Project: "main", Run: "web", StripPrefix: true, MinReplicas: 0})
		fs.onWake = func(fs *fakeServices) {
			go func() {
				time.Sleep(100 * time.Millisecond)
				fs.set(Service{Project: "main", Run: "web", StripPrefix: true, MinReplicas: 0, Replicas: []Replica{rep}})
			}()
		}
		resp := f.do(t, "GET", "/proxy/services/main/web/hi", "", nil)
		if body := readBody(t, resp); resp.StatusCode != 200 || !strings.HasPrefix(body, "r1 /hi") {
			t.Fatalf("got %d %q, want r1's answer", resp.StatusCode, body)
		}
		if fs.wakes != 1 {
			t.Fatalf("wakes = %d, want 1", fs.wakes)
		}
		if got := f.srv.deps.Meter.LastRequest("main", "web"); !got.Equal(t0) {
			t.Fatalf("meter's last request = %v, want %v", got, t0)
		}
	})
	t.Run("a held request that sees no replica in time is 503", func(t *testing.T) {
		f, _ := proxyFixture(t, Service{Project: "main", Run: "web", MinReplicas: 0})
		f.srv.proxy.lim.Hold = 100 * time.Millisecond
		if resp := f.do(t, "GET", "/proxy/services/main/web/", "", nil); resp.StatusCode != http.StatusServiceUnavailable {
			t.Fatalf("got %d, want 503", resp.StatusCode)
		}
	})
	t.Run("beyond the queue a request is 503 at once", func(t *testing.T) {
		f, _ := proxyFixture(t, Service{Project: "main", Run: "web", MinReplicas: 0})
		f.srv.proxy.held <- struct{}{} // the queue (1) is full
		start := time.Now()
		if resp := f.do(t, "GET", "/proxy/services/main/web/", "", nil); resp.StatusCode != http.StatusServiceUnavailable || time.Since(start) > time.Second {
			t.Fatalf("got %d after %v, want 503 at once", resp.StatusCode, time.Since(start))
		}
	})
}

func TestProxy_rateLimitsPerClientAndLongestPrefix(t *testing.T) {
	rep := upstream(t, "r1")
	// The fixture's clock stands still: buckets do not refill.
	f, _ := proxyFixture(t, Service{Project: "main", Run: "web", StripPrefix: true, MinReplicas: 1, Replicas: []Replica{rep},
		RateLimits: []ServiceRateLimit{{Prefix: "/", RPS: 1, Burst: 2}, {Prefix: "/api", RPS: 1}}})
	codes := func(path string, n int) string {
		var out []string
		for range n {
			resp := f.do(t, "GET", path, "", nil)
			out = append(out, fmt.Sprint(resp.StatusCode))
			if resp.StatusCode == http.StatusTooManyRequests && resp.Header.Get("Retry-After") == "" {
				t.Fatalf("429 without Retry-After")
			}
		}
		return strings.Join(out, " ")
	}
	if got := codes("/proxy/services/main/web/api/x", 2); got != "200 429" {
		t.Fatalf("/api (1 rps, no burst): %s, want 200 429", got)
	}
	if got := codes("/proxy/services/main/web/page", 4); got != "200 200 200 429" {
		t.Fatalf("/ (1 rps, burst 2): %s, want 200 200 200 429", got)
	}
	if rps := f.srv.deps.Meter.RPS("main", "web", time.Second); rps != 6 {
		t.Fatalf("meter counted %v requests in the second, want 6 (refused ones count)", rps)
	}
}

func TestProxy_streamsAnswersAndRequestBodies(t *testing.T) {
	got := make(chan string, 1)
	release := make(chan struct{})
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// The request body's first line arrives before the client sent
		// the rest.
		_ = http.NewResponseController(w).EnableFullDuplex()
		br := bufio.NewReader(r.Body)
		line, _ := br.ReadString('\n')
		got <- line
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "data: one\n\n")
		w.(http.Flusher).Flush()
		<-release
		fmt.Fprint(w, "data: two\n\n")
	}))
	t.Cleanup(ts.Close)
	defer close(release)
	rep := Replica{JobID: "r1", Addr: ts.Listener.Addr().String(), Transport: ts.Client().Transport}
	f, _ := proxyFixture(t, Service{Project: "main", Run: "web", StripPrefix: true, MinReplicas: 1, Replicas: []Replica{rep}})

	pr, pw := io.Pipe()
	defer pw.Close()
	req, _ := http.NewRequestWithContext(t.Context(), "POST", f.ts.URL+"/proxy/services/main/web/stream", pr)
	type result struct {
		resp *http.Response
		err  error
	}
	done := make(chan result, 1)
	go func() {
		resp, err := http.DefaultClient.Do(req)
		done <- result{resp, err}
	}()
	if _, err := io.WriteString(pw, "first\n"); err != nil {
		t.Fatal(err)
	}
	select {
	case line := <-got:
		if line != "first\n" {
			t.Fatalf("upstream read %q", line)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the request body's first line did not reach the replica before the body ended")
	}
	var res result
	select {
	case res = <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("no answer headers while the replica streams")
	}
	if res.err != nil {
		t.Fatal(res.err)
	}
	defer res.resp.Body.Close()
	line := make(chan string, 1)
	go func() {
		l, _ := bufio.NewReader(res.resp.Body).ReadString('\n')
		line <- l
	}()
	select {
	case l := <-line:
		if l != "data: one\n" {
			t.Fatalf("first event %q", l)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the first event was not flushed to the client")
	}
}

func TestProxy_webSocketUpgrade(t *testing.T) {
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Upgrade") != "websocket" {
			http.Error(w, "upgrade required", http.StatusUpgradeRequired)
			return
		}
		conn, brw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		defer conn.Close()
		fmt.Fprint(brw, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n")
		brw.Flush()
		l, _ := brw.ReadString('\n') // echo one line
		fmt.Fprint(brw, "echo "+l)
		brw.Flush()
	}))
	t.Cleanup(ts.Close)
	rep := Replica{JobID: "r1", Addr: ts.Listener.Addr().String(), Transport: ts.Client().Transport}
	f, _ := proxyFixture(t, Service{Project: "main", Run: "ws", Auth: true, StripPrefix: true, MinReplicas: 1, Replicas: []Replica{rep}})

	conn, err := net.Dial("tcp", f.ts.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	fmt.Fprintf(conn, "GET /proxy/services/main/ws/socket HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n"+
		"Connection: Upgrade\r\nUpgrade: websocket\r\n\r\n", userTok)
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("got %d, want 101", resp.StatusCode)
	}
	fmt.Fprint(conn, "hello\n")
	if l, err := br.ReadString('\n'); err != nil || l != "echo hello\n" {
		t.Fatalf("over the upgraded connection: %q %v", l, err)
	}
}

func TestMeter_requestsPerSecondOverAWindow(t *testing.T) {
	now := t0
	m := NewMeter(func() time.Time { return now })
	for i := range 10 { // 10 requests in each of 10 seconds
		now = t0.Add(time.Duration(i) * time.Second)
		for range 10 {
			m.record("main", "web")
		}
	}
	if got := m.RPS("main", "web", 10*time.Second); got != 10 {
		t.Fatalf("RPS over 10 s = %v, want 10", got)
	}
	if got := m.RPS("main", "web", 20*time.Second); got != 5 {
		t.Fatalf("RPS over 20 s = %v, want 5", got)
	}
	now = now.Add(time.Hour)
	if got := m.RPS("main", "web", time.Minute); got != 0 {
		t.Fatalf("RPS an hour later = %v, want 0", got)
	}
	if got := m.LastRequest("main", "web"); !got.Equal(t0.Add(9 * time.Second)) {
		t.Fatalf("LastRequest = %v", got)
	}
	if got := m.LastRequest("main", "other"); !got.IsZero() {
		t.Fatalf("LastRequest of a run never called = %v, want zero", got)
	}
}

func TestProxy_modelEndpointListsAndRoutesByModel(t *testing.T) {
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		if r.Header.Get("Authorization") != "" {
			http.Error(w, "hoist's token reached the model", http.StatusTeapot)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprintf(w, "data: {\"path\": %q}\n\n", r.URL.Path)
		w.(http.Flusher).Flush()
		fmt.Fprintf(w, "data: {\"body\": %q}\n\ndata: [DONE]\n\n", b)
	}))
	t.Cleanup(ts.Close)
	rep := Replica{JobID: "r1", Addr: ts.Listener.Addr().String(), Transport: ts.Client().Transport}
	f, _ := proxyFixture(t,
		Service{Project: "main", Run: "llm", Auth: false, MinReplicas: 1, Replicas: []Replica{rep},
			Model: &ServiceModel{Name: "fake-llm", Format: "openai", Prefix: "/api/v1"}},
		Service{Project: "main", Run: "tgi", MinReplicas: 1, Replicas: []Replica{rep},
			Model: &ServiceModel{Name: "tgi-llm", Format: "tgi"}},
		Service{Project: "main", Run: "web", MinReplicas: 1, Replicas: []Replica{rep}})

	if resp := f.do(t, "GET", "/proxy/models/main/models", "", nil); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("models without a token: %d, want 401", resp.StatusCode)
	}
	for _, path := range []string{"/proxy/models/main/models", "/proxy/models/main/v1/models"} {
		resp := f.do(t, "GET", path, userTok, nil)
		var list modelList
		if err := json.NewDecoder(resp.Body).Decode(&list); err != nil || resp.StatusCode != 200 {
			t.Fatalf("GET %s: %d %v", path, resp.StatusCode, err)
		}
		var ids []string
		for _, m := range list.Data {
			ids = append(ids, m.ID)
		}
		slices.Sort(ids)
		if list.Object != "list" || strings.Join(ids, ",") != "fake-llm,tgi-llm" {
			t.Fatalf("GET %s: %+v, want fake-llm and tgi-llm", path, list)
		}
	}

	chat := `{"model": "fake-llm", "stream": true, "messages": [{"role": "user", "content": "hi"}]}`
	resp := f.do(t, "POST", "/proxy/models/main/chat/completions", userTok, strings.NewReader(chat))
	body := readBody(t, resp)
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" ||
		!strings.HasPrefix(body, `data: {"path": "/api/v1/chat/completions"}`) || !strings.Contains(body, `\"content\": \"hi\"`) ||
		!strings.HasSuffix(body, "data: [DONE]\n\n") {
		t.Fatalf("chat completion: %d %q", resp.StatusCode, body)
	}
	for _, tc := range []struct {
		name, body string
		code       int
	}{
		{name: "an unknown model is 404", body: `{"model": "nope"}`, code: http.StatusNotFound},
		{name: "a body without a model is 400", body: `{"messages": []}`, code: http.StatusBadRequest},
		{name: "a tgi model without its chat template yet is 503", body: `{"model": "tgi-llm"}`, code: http.StatusServiceUnavailable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := f.do(t, "POST", "/proxy/models/main/chat/completions", userTok, strings.NewReader(tc.body))
			if resp.StatusCode != tc.code {
				t.Fatalf("got %d %q, want %d", resp.StatusCode, readBody(t, resp), tc.code)
			}
		})
	}
}

func TestProxy_rateLimitsKeyedByAHeader(t *testing.T) {
	rep := upstream(t, "r1")
	// The fixture's clock stands still: buckets do not refill.
	f, _ := proxyFixture(t, Service{Project: "main", Run: "web", StripPrefix: true, MinReplicas: 1, Replicas: []Replica{rep},
		RateLimits: []ServiceRateLimit{{Prefix: "/", Header: "x_api_key", RPS: 1, Burst: 1}}})
	codes := func(n int, header ...string) string {
		var out []string
		for range n {
			resp := f.do(t, "GET", "/proxy/services/main/web/x", "", nil, header...)
			readBody(t, resp)
			out = append(out, fmt.Sprint(resp.StatusCode))
		}
		return strings.Join(out, " ")
	}
	if got := codes(3, "X-Api-Key", "alice"); got != "200 200 429" {
		t.Fatalf("alice: %s, want 200 200 429", got)
	}
	if got := codes(3, "x-api-key", "bob"); got != "200 200 429" {
		t.Fatalf("bob has his own bucket: %s, want 200 200 429", got)
	}
	if got := codes(4); got != "200 200 200 200" {
		t.Fatalf("without the header: %s, want no limit", got)
	}
	if got := codes(3, "X_Api_Key", "alice"); got != "200 200 200" {
		t.Fatalf("a header named with underscores (ignored, as nginx does): %s, want no limit", got)
	}
}
