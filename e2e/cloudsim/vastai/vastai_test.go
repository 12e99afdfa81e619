package vastai

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/google/go-cmp/cmp"

	"hoist/e2e/cloudsim/sim"
)

// serve starts the simulated Vast.ai in the test's process and returns
// its API base URL.
func serve(t *testing.T) (string, *sim.Sim) {
	t.Helper()
	s, err := sim.New(sim.Config{StateDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	p := New()
	srv := httptest.NewServer(p.Handler(s))
	t.Cleanup(func() { srv.Close(); s.Close() })
	return p.Backend(s, srv.URL)["endpoint_url"].(string), s
}

// call makes one API call with key and returns the status and the body.
func call(t *testing.T, base, key, method, path string, in any) (int, []byte) {
	t.Helper()
	var body io.Reader
	if in != nil {
		b, _ := json.Marshal(in)
		body = bytes.NewReader(b)
	}
	req, _ := http.NewRequestWithContext(t.Context(), method, base+path, body)
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

func TestBundlesSearch(t *testing.T) {
	base, _ := serve(t)
	tests := []struct {
		name  string
		query map[string]any
		want  []float64 // ask ids in answer order
	}{
		{"order by score desc", map[string]any{"order": [][]string{{"score", "desc"}}, "limit": 3},
			[]float64{1000002, 1000001, 4090001}},
		{"eq and gte", map[string]any{"datacenter": map[string]any{"eq": true}, "num_gpus": map[string]any{"gte": 2},
			"order": [][]string{{"dph_total", "asc"}}}, []float64{1000001, 1000002}},
		{"in", map[string]any{"gpu_name": map[string]any{"in": []string{"RTX 3090", "Tesla V100"}},
			"order": [][]string{{"id", "asc"}}}, []float64{1001001, 3090001}},
		{"gt, lt and notin", map[string]any{"reliability2": map[string]any{"gt": 0.9}, "dph_total": map[string]any{"lt": 1},
			"gpu_name": map[string]any{"notin": []string{"RTX 3090"}}, "order": [][]string{{"id", "asc"}}},
			[]float64{1001001, 4090001, 4090002}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st, b := call(t, base, APIKey, "POST", "/bundles/", tt.query)
			var out struct {
				Offers []map[string]any `json:"offers"`
			}
			if st != 200 || json.Unmarshal(b, &out) != nil {
				t.Fatalf("status %d: %s", st, b)
			}
			var ids []float64
			for _, o := range out.Offers {
				ids = append(ids, o["id"].(float64))
			}
			if diff := cmp.Diff(tt.want, ids); diff != "" {
				t.Errorf("asks (-want +got):\n%s", diff)
			}
		})
	}
}

func TestErrorAnswers(t *testing.T) {
	base, s := serve(t)
	tests := []struct {
		name         string
		key, method  string
		path         string
		in           any
		faults       sim.Faults
		status       int
		wantContains string
	}{
		{"bad key", "wrong", "GET", "/instances/", nil, sim.Faults{}, 401, `"success":false`},
		{"unknown field", APIKey, "POST", "/bundles/", map[string]any{"gpu_nam": map[string]any{"eq": "x"}}, sim.Faults{}, 400, `"error":"invalid_args"`},
		{"unknown instance", APIKey, "DELETE", "/instances/1/", nil, sim.Faults{}, 404, `"error":"no_such_instance"`},
		{"no capacity", APIKey, "PUT", "/asks/4090001/", map[string]any{"client_id": "me", "image": "x", "disk": 10,
			"runtype": "args", "onstart": "/bin/sh", "args": []string{"-c", "true"}}, sim.Faults{Capacity: map[string]int{"4090001": 0}},
			400, `"success":false`},
		{"throttled", APIKey, "GET", "/instances/", nil, sim.Faults{ErrorRate: 1}, 429, "API requests too frequent"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s.SetFaults(tt.faults)
			defer s.SetFaults(sim.Faults{})
			st, b := call(t, base, tt.key, tt.method, tt.path, tt.in)
			if st != tt.status || !bytes.Contains(b, []byte(tt.wantContains)) {
				t.Errorf("status %d body %s, want %d with %s", st, b, tt.status, tt.wantContains)
			}
		})
	}
	if n := len(s.List(Name, KindPod)); n != 0 {
		t.Errorf("%d instances after refused rentals", n)
	}
}
