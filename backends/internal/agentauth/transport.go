package agentauth

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sync"
	"time"

	"hoist/agents/api"
)

// relistEvery bounds how often a request to an address no runner is known
// at (a service probe, a runner started since) lists the shim's tasks.
const relistEvery = time.Second

// NewToken returns a fresh shim token: 32 random bytes in hex.
func NewToken() (string, error) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("shim token: %w", err)
	}
	return hex.EncodeToString(b[:]), nil
}

// Transport adds the agents' bearer tokens to the requests it sends through
// Base. Set the exported fields before first use; it is safe for concurrent
// use.
type Transport struct {
	// Base sends the requests ("as seen from the instance").
	Base http.RoundTripper
	// ShimURL is the shim's base URL, as in Conn.ShimURL.
	ShimURL string
	// Token returns the shim's current token (read on every request: a
	// redeployed shim may have got a new one).
	Token func() string

	mu      sync.Mutex
	runners map[string]string // runner URL host (api.BaseURL) → its token
	listed  time.Time
}

// RoundTrip sends req with the token of the agent it is addressed to, if
// any, and without changing a request that already carries one.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Header.Get("Authorization") != "" {
		return t.Base.RoundTrip(req)
	}
	if t.isShim(req) {
		return t.Base.RoundTrip(withToken(req, t.Token()))
	}
	tok := t.runnerToken(req)
	if tok == "" {
		return t.Base.RoundTrip(req)
	}
	resp, err := t.Base.RoundTrip(withToken(req, tok))
	if err == nil && resp.StatusCode == http.StatusUnauthorized {
		// Another runner took the address since: look it up afresh next time.
		t.mu.Lock()
		delete(t.runners, req.URL.Host)
		t.listed = time.Time{}
		t.mu.Unlock()
	}
	return resp, err
}

func (t *Transport) isShim(req *http.Request) bool {
	return req.URL.Scheme+"://"+req.URL.Host == t.ShimURL
}

// runnerToken returns the token of the runner at req's address, listing the
// shim's tasks when the address is unknown (at most every relistEvery).
func (t *Transport) runnerToken(req *http.Request) string {
	t.mu.Lock()
	defer t.mu.Unlock()
	if tok, ok := t.runners[req.URL.Host]; ok {
		return tok
	}
	if time.Since(t.listed) < relistEvery {
		return ""
	}
	t.listed = time.Now()
	list, err := t.list(req)
	if err != nil {
		return ""
	}
	t.runners = map[string]string{}
	for _, ti := range list.Tasks {
		if ti.RunnerAddr == "" || ti.RunnerToken == "" {
			continue
		}
		// Requests to the runner carry its address as api.BaseURL spells it.
		if u, err := url.Parse(api.BaseURL(ti.RunnerAddr)); err == nil {
			t.runners[u.Host] = ti.RunnerToken
		}
	}
	return t.runners[req.URL.Host]
}

func (t *Transport) list(orig *http.Request) (api.TaskList, error) {
	var list api.TaskList
	req, err := http.NewRequestWithContext(orig.Context(), http.MethodGet, t.ShimURL+"/api/v1/tasks", nil)
	if err != nil {
		return list, err
	}
	resp, err := t.Base.RoundTrip(withToken(req, t.Token()))
	if err != nil {
		return list, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, resp.Body)
		return list, fmt.Errorf("list shim tasks: http %d", resp.StatusCode)
	}
	err = json.NewDecoder(resp.Body).Decode(&list)
	return list, err
}

// withToken returns a copy of req that carries token.
func withToken(req *http.Request, token string) *http.Request {
	r := req.Clone(req.Context())
	r.Header.Set("Authorization", "Bearer "+token)
	return r
}
