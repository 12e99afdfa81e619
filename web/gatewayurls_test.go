package web

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// TestRuns_serviceURLIsTheGatewaysWhenOneServesTheRun: a service run on a
// gateway shows its gateway URL and model base URL in the API and on its
// page; one on hoist's proxy shows the proxy path, and its model's base
// URL is the service's with the prefix (openai) or the model endpoint.
func TestRuns_serviceURLIsTheGatewaysWhenOneServesTheRun(t *testing.T) {
	f, fs := proxyFixture(t)
	fs.urls = map[string]ServiceURLs{"main/edge": {Service: "https://edge.main.example.com/", Model: "https://edge.main.example.com/v1"}}
	t0 := time.Now().UTC()
	f.store.putRun(Run{Name: "edge", Type: "service", Status: "running", Revision: "abc", SubmittedAt: t0})
	f.store.putRun(Run{Name: "inside", Type: "service", Status: "running", Revision: "abc", SubmittedAt: t0})
	f.store.putRun(Run{Name: "chat", Type: "service", Status: "running", Revision: "abc", SubmittedAt: t0,
		Spec: []byte(`{"type":"service","model":{"name":"llama","format":"openai","prefix":"/v1"}}`)})
	f.store.putRun(Run{Name: "tgi", Type: "service", Status: "running", Revision: "abc", SubmittedAt: t0,
		Spec: []byte(`{"type":"service","model":{"name":"llama","format":"tgi"}}`)})
	for _, tc := range []struct{ run, url, model string }{
		{"edge", "https://edge.main.example.com/", "https://edge.main.example.com/v1"},
		{"inside", "/proxy/services/main/inside/", ""},
		{"chat", "/proxy/services/main/chat/", "/proxy/services/main/chat/v1"},
		{"tgi", "/proxy/services/main/tgi/", "/proxy/models/main/"},
	} {
		var got Run
		resp := f.do(t, "GET", "/api/v1/runs/"+tc.run, userTok, nil)
		if err := json.Unmarshal([]byte(readBody(t, resp)), &got); err != nil {
			t.Fatal(err)
		}
		if got.ServiceURL != tc.url || got.ModelURL != tc.model {
			t.Errorf("run %s: service_url %q model_url %q, want %q %q", tc.run, got.ServiceURL, got.ModelURL, tc.url, tc.model)
		}
		page := readBody(t, f.do(t, "GET", "/runs/"+tc.run, userTok, nil))
		if !strings.Contains(page, tc.url) || (tc.model != "" && !strings.Contains(page, `data-testid="model-url"`)) {
			t.Errorf("run %s page does not show %s (model %q)", tc.run, tc.url, tc.model)
		}
	}
}
