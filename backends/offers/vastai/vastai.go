package vastai

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"regexp"
	"strings"

	"hoist/backends/offers"
)

// DefaultURL is vast.ai's bundle search endpoint.
const DefaultURL = "https://console.vast.ai/api/v0/bundles/"

// Provider lists vast.ai offers. The zero value is usable.
type Provider struct {
	// URL is the bundle search endpoint; default DefaultURL.
	URL string
	// Client makes requests; default http.DefaultClient.
	Client *http.Client
	// Limit caps the machines asked for; default 1000 (3000 when the
	// query names GPUs vast.ai's filter cannot express).
	Limit int
}

// Name implements offers.Provider.
func (p *Provider) Name() string { return "vastai" }

// bundle is the part of a vast.ai search result hoist reads.
type bundle struct {
	ID                json.Number `json:"id"`
	GPUName           string      `json:"gpu_name"`
	NumGPUs           int         `json:"num_gpus"`
	GPURAM            float64     `json:"gpu_ram"` // MB
	CPUCores          float64     `json:"cpu_cores"`
	CPUCoresEffective float64     `json:"cpu_cores_effective"`
	CPURAM            float64     `json:"cpu_ram"` // MB, whole machine
	DiskSpace         float64     `json:"disk_space"`
	DPHBase           float64     `json:"dph_base"`
	StorageCost       float64     `json:"storage_cost"` // $/GB/month
	MinBid            float64     `json:"min_bid"`
	Geolocation       *string     `json:"geolocation"`
}

// Offers implements offers.Provider: one search narrowed by q's resource
// limits, sorted by vast.ai's score; the Market filters and sorts again.
func (p *Provider) Offers(ctx context.Context, q offers.Query) ([]offers.Offer, error) {
	body, err := json.Marshal(searchFilters(q, p.Limit))
	if err != nil {
		return nil, fmt.Errorf("vastai: %w", err)
	}
	url := p.URL
	if url == "" {
		url = DefaultURL
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("vastai: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	client := p.Client
	if client == nil {
		client = http.DefaultClient
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("vastai search: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return nil, fmt.Errorf("vastai search: %s: %s", resp.Status, strings.TrimSpace(string(b)))
	}
	var data struct {
		Offers []bundle `json:"offers"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 64<<20)).Decode(&data); err != nil {
		return nil, fmt.Errorf("vastai search: decode: %w", err)
	}
	out := make([]offers.Offer, 0, 2*len(data.Offers))
	for _, b := range data.Offers {
		o, ok := toOffer(b, q)
		if !ok {
			continue
		}
		out = append(out, o)
		if b.MinBid > 0 {
			spot := o
			spot.Spot, spot.Price = true, round5(b.MinBid)
			out = append(out, spot)
		}
	}
	return out, nil
}

// toOffer converts one machine; ok is false for entries without an id,
// price or CPUs.
func toOffer(b bundle, q offers.Query) (offers.Offer, bool) {
	if b.ID == "" || b.DPHBase <= 0 || b.CPUCoresEffective <= 0 {
		return offers.Offer{}, false
	}
	disk := b.DiskSpace
	if q.Disk.HasMin && q.Disk.Min > 0 {
		disk = q.Disk.Min // the disk that would be rented
	}
	mem := 0.0
	if b.CPUCores > 0 {
		mem = math.Floor(b.CPURAM * b.CPUCoresEffective / b.CPUCores / 1000) // this offer's share, GB
	}
	o := offers.Offer{
		Backend:      "vastai",
		Instance:     b.ID.String(),
		Region:       location(b.Geolocation),
		Price:        round5(b.DPHBase + disk*b.StorageCost/30/24),
		CPUs:         int(b.CPUCoresEffective),
		MemoryGB:     mem,
		DiskGB:       disk,
		Availability: offers.AvailabilityAvailable,
	}
	if b.NumGPUs > 0 {
		o.GPUCount, o.GPUName, o.GPUMemoryGB = b.NumGPUs, b.GPUName, b.GPURAM/1024
	}
	return o, true
}

func location(g *string) string {
	if g == nil {
		return "unknown"
	}
	s := strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(*g), ","))
	if s == "" {
		return "unknown"
	}
	return s
}

func round5(v float64) float64 { return math.Round(v*1e5) / 1e5 }

// searchFilters builds vast.ai's search document: {field: {op: value}}
// plus rentable/rented/order/limit. GPU memory bounds get gpuhunt's 7%
// tolerance because vast.ai reports measured sizes.
func searchFilters(q offers.Query, limit int) map[string]any {
	f := map[string]any{
		"rentable": map[string]any{"eq": true},
		"rented":   map[string]any{"eq": false},
		"order":    [][]string{{"score", "desc"}},
	}
	bound := func(field string, r offers.Range, scale, loTol, hiTol float64) {
		m := map[string]any{}
		if r.HasMin {
			m["gte"] = r.Min * scale * loTol
		}
		if r.HasMax {
			m["lte"] = r.Max * scale * hiTol
		}
		if len(m) > 0 {
			f[field] = m
		}
	}
	bound("cpu_cores", q.CPU, 1, 1, 1)
	bound("cpu_ram", q.Memory, 1000, 1, 1)
	bound("gpu_ram", q.GPUMemory, 1024, 0.93, 1.07)
	bound("disk_space", q.Disk, 1, 1, 1)
	if !(q.GPUCount.HasMin && q.GPUCount.Min == 0) { // gpu 0.. keeps CPU machines
		bound("num_gpus", q.GPUCount, 1, 1, 1)
	}
	if q.MaxPrice > 0 {
		f["dph_total"] = map[string]any{"lte": q.MaxPrice}
	}
	if limit <= 0 {
		limit = 1000
	}
	if len(q.GPUNames) > 0 {
		var names []string
		for _, n := range q.GPUNames {
			v := vastNames(n)
			if v == nil {
				names = nil // one unmappable name: filter locally instead
				break
			}
			names = append(names, v...)
		}
		if names != nil {
			f["gpu_name"] = map[string]any{"in": names}
		} else {
			limit = max(limit, 3000)
		}
	}
	f["limit"] = limit
	return f
}

var (
	rtxNumber = regexp.MustCompile(`^RTX(\d{4})(S|Ti|SUPER|TiSUPER|Ada)?$`)
	workstn   = regexp.MustCompile(`^A(\d{4})$`)
)

// vastNames spells a canonical GPU name the ways vast.ai lists it; nil
// when unknown.
func vastNames(name string) []string {
	canon, _, _ := offers.NormalizeGPUName(name)
	switch canon {
	case "A100":
		return []string{"A100 PCIE", "A100 SXM4", "A100X"}
	case "H100":
		return []string{"H100 PCIE", "H100 SXM"}
	case "H100NVL":
		return []string{"H100 NVL"}
	case "H200NVL":
		return []string{"H200 NVL"}
	case "V100", "T4", "P100", "P40", "P4":
		return []string{"Tesla " + canon}
	case "L4", "L40", "L40S", "A10", "A40", "H200", "B200", "A800":
		return []string{canon}
	}
	if m := workstn.FindStringSubmatch(canon); m != nil {
		return []string{"RTX A" + m[1]}
	}
	if m := rtxNumber.FindStringSubmatch(canon); m != nil {
		switch m[2] {
		case "":
			return []string{"RTX " + m[1]}
		case "Ti":
			return []string{"RTX " + m[1] + " Ti"}
		case "Ada":
			return []string{"RTX " + m[1] + "Ada"}
		default:
			return []string{"RTX " + m[1] + strings.ReplaceAll(m[2], "Ti", " Ti")}
		}
	}
	return nil
}
