package arm

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"hoist/e2e/cloudsim/sim"
)

// The driver's tests (backends/azure) exercise the simulator through the
// real SDK; these check the wire details the SDK does not show.

func startServer(t *testing.T) (*httptest.Server, *sim.Sim) {
	t.Helper()
	s, err := sim.New(sim.Config{StateDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(New().Handler(s))
	srv.StartTLS()
	t.Cleanup(func() {
		srv.Close()
		s.Close()
	})
	return srv, s
}

func do(t *testing.T, srv *httptest.Server, method, path, token string, form url.Values) (int, map[string]any) {
	t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, srv.URL+path, body)
	if err != nil {
		t.Fatal(err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out
}

func code(m map[string]any) string {
	e, _ := m["error"].(map[string]any)
	c, _ := e["code"].(string)
	return c
}

func TestIdentityAndAuthorization(t *testing.T) {
	srv, _ := startServer(t)
	rg := "/subscriptions/" + SubscriptionID + "/resourcegroups/nope?api-version=2021-04-01"

	status, body := do(t, srv, http.MethodGet, "/"+TenantID+"/v2.0/.well-known/openid-configuration", "", nil)
	issuer, _ := body["issuer"].(string)
	if status != http.StatusOK || !strings.HasPrefix(issuer, srv.URL+"/") || body["token_endpoint"] != srv.URL+"/"+TenantID+"/oauth2/v2.0/token" {
		t.Fatalf("openid-configuration: %d %v", status, body)
	}
	if status, body := do(t, srv, http.MethodGet, "/common/discovery/instance?api-version=1.1", "", nil); status != http.StatusOK || body["tenant_discovery_endpoint"] == nil {
		t.Fatalf("instance discovery: %d %v", status, body)
	}

	form := url.Values{"grant_type": {"client_credentials"}, "client_id": {ClientID}, "client_secret": {ClientSecret},
		"scope": {"https://management.azure.com/.default"}}
	for _, tt := range []struct {
		name   string
		tenant string
		change url.Values
		status int
		error  string
	}{
		{"wrong_secret", TenantID, url.Values{"client_secret": {"x"}}, http.StatusUnauthorized, "invalid_client"},
		{"unknown_client", TenantID, url.Values{"client_id": {"x"}}, http.StatusBadRequest, "unauthorized_client"},
		{"wrong_grant", TenantID, url.Values{"grant_type": {"password"}}, http.StatusBadRequest, "unsupported_grant_type"},
		{"unknown_tenant", "other", nil, http.StatusBadRequest, "invalid_tenant"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := url.Values{}
			for k, v := range form {
				f[k] = v
			}
			for k, v := range tt.change {
				f[k] = v
			}
			status, body := do(t, srv, http.MethodPost, "/"+tt.tenant+"/oauth2/v2.0/token", "", f)
			if status != tt.status || body["error"] != tt.error {
				t.Fatalf("token: %d %v, want %d %s", status, body, tt.status, tt.error)
			}
		})
	}
	status, body = do(t, srv, http.MethodPost, "/"+TenantID+"/oauth2/v2.0/token", "", form)
	token, _ := body["access_token"].(string)
	if status != http.StatusOK || body["token_type"] != "Bearer" || token == "" || body["expires_in"] == nil {
		t.Fatalf("token: %d %v", status, body)
	}

	for _, tt := range []struct {
		name, token, code string
		status            int
	}{
		{"no_token", "", "AuthenticationFailed", http.StatusUnauthorized},
		{"forged_token", token + "x", "InvalidAuthenticationToken", http.StatusUnauthorized},
		{"token", token, "ResourceGroupNotFound", http.StatusNotFound},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if status, body := do(t, srv, http.MethodGet, rg, tt.token, nil); status != tt.status || code(body) != tt.code {
				t.Fatalf("GET resource group: %d %v, want %d %s", status, body, tt.status, tt.code)
			}
		})
	}
}

func TestThrottling(t *testing.T) {
	srv, s := startServer(t)
	s.SetFaults(sim.Faults{ErrorRate: 1})
	req, _ := http.NewRequest(http.MethodGet, srv.URL+"/subscriptions/"+SubscriptionID+"/resourcegroups/rg?api-version=1", nil)
	req.Header.Set("Authorization", "Bearer "+signToken(ClientID, s.Now().Add(tokenLifetime)))
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") != "1" {
		t.Fatalf("throttled call: %s, Retry-After %q", resp.Status, resp.Header.Get("Retry-After"))
	}
	if n := s.Stats().Failed[name]["GET resourcegroups"]; n != 1 {
		t.Fatalf("failed calls counted: %v", s.Stats().Failed)
	}
}

func TestBackend(t *testing.T) {
	entry := New().Backend(nil, "https://127.0.0.1:1")
	b, _ := json.Marshal(entry)
	for _, key := range []string{`"type":"azure"`, `"tenant_id"`, `"subscription_id"`, `"client_secret"`, `"endpoint_url":"https://127.0.0.1:1"`, `"user":"root"`} {
		if !strings.Contains(string(b), key) {
			t.Errorf("backend entry %s lacks %s", b, key)
		}
	}
}

// TestFaults_kinds: the injected kinds as Resource Manager answers them:
// 429 TooManyRequests with Retry-After, 500 InternalServerError, and a
// connection closed unanswered for timeouts and lost answers.
func TestFaults_kinds(t *testing.T) {
	srv, s := startServer(t)
	get := func() (*http.Response, error) {
		req, _ := http.NewRequest(http.MethodGet, srv.URL+"/subscriptions/"+SubscriptionID+"/resourcegroups/rg?api-version=1", nil)
		req.Header.Set("Authorization", "Bearer "+signToken(ClientID, s.Now().Add(tokenLifetime)))
		return srv.Client().Do(req)
	}
	for _, tc := range []struct {
		kind       sim.Fault
		status     int
		retryAfter string
	}{
		{sim.FaultThrottle, http.StatusTooManyRequests, "1"},
		{sim.FaultTransient, http.StatusInternalServerError, ""},
		{sim.FaultTimeout, 0, ""},
		{sim.FaultLost, 0, ""},
	} {
		s.SetFaults(sim.Faults{ErrorRate: 1, HoldMS: 50, ErrorKinds: map[sim.Fault]float64{tc.kind: 1}})
		resp, err := get()
		if tc.status == 0 {
			if err == nil {
				resp.Body.Close()
				t.Errorf("%s: %s, want the connection closed unanswered", tc.kind, resp.Status)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", tc.kind, err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.status || resp.Header.Get("Retry-After") != tc.retryAfter {
			t.Errorf("%s: %s, Retry-After %q; want %d, %q", tc.kind, resp.Status, resp.Header.Get("Retry-After"), tc.status, tc.retryAfter)
		}
	}
	if st := s.Stats().FailedByKind[name]; st["timeout"] != 1 || st["lost"] != 1 || st["transient"] != 1 || st["throttle"] != 1 {
		t.Errorf("failed by kind %v, want one of each", st)
	}
}
