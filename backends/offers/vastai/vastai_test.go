package vastai

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"hoist/backends/offers"
)

// searchResult is a trimmed vast.ai bundle search answer (field names and
// units as the API returns them: MB for RAM, $/GB/month for storage).
const searchResult = `{"offers": [
 {"id": 1001, "gpu_name": "RTX 4090", "num_gpus": 2, "gpu_ram": 24564, "cpu_cores": 32, "cpu_cores_effective": 16,
  "cpu_ram": 128000, "disk_space": 200, "dph_base": 0.70, "storage_cost": 0.1, "min_bid": 0.35,
  "geolocation": "Texas, US", "rentable": true},
 {"id": 1002, "gpu_name": "H100 SXM", "num_gpus": 8, "gpu_ram": 81559, "cpu_cores": 192, "cpu_cores_effective": 192,
  "cpu_ram": 2063000, "disk_space": 1000, "dph_base": 16.0, "storage_cost": 0.2, "min_bid": 0,
  "geolocation": null},
 {"id": 1003, "gpu_name": "Q RTX 8000", "num_gpus": 1, "gpu_ram": 49152, "cpu_cores": 8, "cpu_cores_effective": 8,
  "cpu_ram": 32000, "disk_space": 50, "dph_base": 0.3, "storage_cost": 0.1, "min_bid": 0.1, "geolocation": "Quebec, CA"},
 {"id": 1004, "gpu_name": "RTX 3090", "num_gpus": 1, "dph_base": 0, "cpu_cores_effective": 4}
]}`

func TestProvider_Offers(t *testing.T) {
	var got map[string]any
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			t.Errorf("method %s, want POST", r.Method)
		}
		if err := json.NewDecoder(r.Body).Decode(&got); err != nil {
			t.Error(err)
		}
		w.Write([]byte(searchResult))
	}))
	t.Cleanup(srv.Close)
	p := &Provider{URL: srv.URL, Client: srv.Client()}
	q := offers.Query{GPUNames: []string{"RTX4090", "H100"}, GPUCount: offers.Between(1, 8), GPUMemory: offers.AtLeast(24),
		Memory: offers.AtLeast(64), MaxPrice: 20}
	list, err := p.Offers(t.Context(), q)
	if err != nil {
		t.Fatal(err)
	}

	wantFilters := map[string]any{
		"rentable": map[string]any{"eq": true}, "rented": map[string]any{"eq": false},
		"order":     []any{[]any{"score", "desc"}},
		"num_gpus":  map[string]any{"gte": 1.0, "lte": 8.0},
		"gpu_ram":   map[string]any{"gte": 24 * 1024 * 0.93},
		"cpu_ram":   map[string]any{"gte": 64000.0},
		"dph_total": map[string]any{"lte": 20.0},
		"gpu_name":  map[string]any{"in": []any{"RTX 4090", "H100 PCIE", "H100 SXM"}},
		"limit":     1000.0,
	}
	if diff := cmp.Diff(wantFilters, got); diff != "" {
		t.Errorf("search filters (-want +got):\n%s", diff)
	}

	var ids []string
	for _, o := range list {
		ids = append(ids, o.Instance+map[bool]string{true: "/spot", false: ""}[o.Spot])
	}
	if diff := cmp.Diff([]string{"1001", "1001/spot", "1002", "1003", "1003/spot"}, ids); diff != "" {
		t.Errorf("offers (-want +got):\n%s", diff)
	}
	o := list[0]
	// 0.70 + 200 GB × 0.1 $/GB/month / 720 h; half the machine's 128 GB.
	if o.Price != 0.72778 || o.MemoryGB != 64 || o.CPUs != 16 || o.GPUCount != 2 || o.Region != "Texas, US" || o.DiskGB != 200 {
		t.Errorf("first offer = %+v", o)
	}
	if list[2].Region != "unknown" {
		t.Errorf("offer without geolocation has region %q", list[2].Region)
	}
}

func TestProvider_inMarket(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(searchResult))
	}))
	t.Cleanup(srv.Close)
	m := offers.NewMarket(offers.MarketConfig{Online: []offers.Provider{&Provider{URL: srv.URL, Client: srv.Client()}},
		Logger: slog.New(slog.DiscardHandler)})
	ans := m.Query(t.Context(), offers.Query{GPUNames: []string{"H100"}, GPUCount: offers.AtLeast(1), SpotPolicy: offers.SpotPolicyAuto})
	if len(ans.Offers) != 1 || ans.Offers[0].GPUName != "H100" || ans.Offers[0].GPUMemoryGB != 80 {
		t.Fatalf("offers = %+v, failed %v", ans.Offers, ans.Failed)
	}
	ans = m.Query(t.Context(), offers.Query{GPUCount: offers.AtLeast(1), SpotPolicy: offers.SpotPolicySpot})
	var names []string
	for _, o := range ans.Offers {
		names = append(names, o.GPUName)
	}
	if diff := cmp.Diff([]string{"QRTX8000", "RTX4090"}, names); diff != "" {
		t.Errorf("spot offers, cheapest first (-want +got):\n%s", diff)
	}
}

func TestProvider_errors(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.Contains(r.URL.Path, "bad") {
			w.Write([]byte("not json"))
			return
		}
		http.Error(w, "slow down", http.StatusTooManyRequests)
	}))
	t.Cleanup(srv.Close)
	for _, path := range []string{"/limited", "/bad"} {
		p := &Provider{URL: srv.URL + path, Client: srv.Client()}
		if _, err := p.Offers(t.Context(), offers.Query{}); err == nil {
			t.Errorf("%s: no error", path)
		}
	}
}

func TestSearchFilters_unmappableNameSearchesWider(t *testing.T) {
	f := searchFilters(offers.Query{GPUNames: []string{"H100", "Mystery9000"}}, 0)
	if _, ok := f["gpu_name"]; ok || f["limit"] != 3000 {
		t.Errorf("filters = %v, want no gpu_name filter and limit 3000", f)
	}
	f = searchFilters(offers.Query{GPUCount: offers.AtLeast(0)}, 50)
	if _, ok := f["num_gpus"]; ok || f["limit"] != 50 {
		t.Errorf("gpu 0.. filters = %v, want no num_gpus bound", f)
	}
}

func TestVastNames(t *testing.T) {
	for in, want := range map[string][]string{
		"A6000": {"RTX A6000"}, "RTX4090": {"RTX 4090"}, "rtx3080ti": {"RTX 3080 Ti"}, "RTX6000Ada": {"RTX 6000Ada"},
		"V100": {"Tesla V100"}, "H100NVL": {"H100 NVL"}, "L40S": {"L40S"}, "MI300X": nil,
	} {
		if got := vastNames(in); !cmp.Equal(got, want) {
			t.Errorf("vastNames(%q) = %q, want %q", in, got, want)
		}
	}
}
