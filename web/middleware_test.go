package web_test

import (
	"net/http"
	"testing"
)

func TestServer_badBytesInURLAnswer400(t *testing.T) {
	e := newLiveEnv(t)
	tests := []struct {
		name, path string
		want       int
	}{
		{"NUL in a page path", "/runs/a%00b", http.StatusBadRequest},
		{"NUL in an API path", "/api/v1/runs/a%00b", http.StatusBadRequest},
		{"NUL in a log path", "/api/v1/runs/a%00b/logs", http.StatusBadRequest},
		{"newline in a path", "/api/v1/runs/a%0Ab", http.StatusBadRequest},
		{"invalid UTF-8 in a path", "/api/v1/runs/a%ffb", http.StatusBadRequest},
		{"NUL in a query value", "/api/v1/runs?status=%00", http.StatusBadRequest},
		{"invalid UTF-8 in a query value", "/api/v1/runs?status=%ff", http.StatusBadRequest},
		{"unknown run", "/api/v1/runs/nope", http.StatusNotFound},
		{"non-ASCII UTF-8 name", "/api/v1/runs/%C3%A9t%C3%A9", http.StatusNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, err := http.NewRequestWithContext(t.Context(), "GET", e.url+tt.path, nil)
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Authorization", "Bearer bootstrap-admin")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != tt.want {
				t.Errorf("GET %s: %d, want %d", tt.path, resp.StatusCode, tt.want)
			}
		})
	}
}
