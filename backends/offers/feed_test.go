package offers

import (
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
)

func TestFeed_inMarket(t *testing.T) {
	var status atomic.Int32
	status.Store(http.StatusOK)
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		if code := int(status.Load()); code != http.StatusOK {
			http.Error(w, "down", code)
			return
		}
		w.Header().Set("Content-Type", "text/csv")
		w.Write([]byte(strings.Join(CSVColumns, ",") + "\n" +
			"m-4090,Texas,0.31,16,64.0,1,RTX 4090,24.0,False,,nvidia,,x86,{}\n" +
			"m-bad,Texas,free,16,64.0,1,RTX 4090,24.0,False,,nvidia,,x86,{}\n" +
			"m-h100,Texas,1.8,32,128.0,1,H100,80.0,False,,nvidia,,x86,{}\n"))
	}))
	t.Cleanup(srv.Close)
	feed := &Feed{Backend: "market", URL: srv.URL, Client: srv.Client()}
	m := NewMarket(MarketConfig{Online: []Provider{feed}, CacheTTL: -1, Logger: slog.New(slog.DiscardHandler)})

	ans := m.Query(t.Context(), Query{GPUNames: []string{"rtx4090"}, GPUCount: AtLeast(1)})
	if len(ans.Offers) != 1 || ans.Offers[0].Instance != "m-4090" || ans.Offers[0].Backend != "market" || ans.Offers[0].GPUName != "RTX4090" {
		t.Fatalf("offers = %+v, failed %v", ans.Offers, ans.Failed)
	}
	status.Store(http.StatusBadGateway)
	ans = m.Query(t.Context(), Query{})
	if ans.Failed["market"] == nil || len(ans.Offers) != 0 {
		t.Errorf("with the feed down: offers %d, failed %v", len(ans.Offers), ans.Failed)
	}
	if hits.Load() != 2 {
		t.Errorf("feed fetched %d times with the cache disabled, want 2", hits.Load())
	}
}
