package offers

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// A Feed is an online Provider reading a gpuhunt CSV from a URL on each
// (cached) query: a self-hosted price list, or a marketplace exporter
// that publishes its live offers in gpuhunt's format. It is also the
// smallest example of an online provider.
type Feed struct {
	// Backend names the feed's offers (and the provider in reports).
	Backend string
	// URL serves the CSV (gpuhunt columns, header required).
	URL string
	// Client makes the request; default http.DefaultClient.
	Client *http.Client
}

// Name implements Provider.
func (f *Feed) Name() string { return f.Backend }

// Offers implements Provider. The whole feed is returned; the Market
// filters it. A feed with malformed rows still answers with the good rows;
// one failing CheckTable is an error.
func (f *Feed) Offers(ctx context.Context, _ Query) ([]Offer, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, f.URL, nil)
	if err != nil {
		return nil, fmt.Errorf("feed %s: %w", f.Backend, err)
	}
	client := f.Client
	if client == nil {
		client = http.DefaultClient
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("feed %s: %w", f.Backend, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("feed %s: %s", f.Backend, resp.Status)
	}
	var body io.Reader = io.LimitReader(resp.Body, maxCatalogBytes)
	if strings.Contains(resp.Header.Get("Content-Type"), "zip") {
		b, err := io.ReadAll(body)
		if err != nil {
			return nil, fmt.Errorf("feed %s: %w", f.Backend, err)
		}
		t, err := readZip(b, f.Backend)
		if err != nil {
			return nil, fmt.Errorf("feed %s: %w", f.Backend, err)
		}
		return checkedOffers(t)
	}
	t, err := ReadCSV(body, f.Backend)
	if err != nil {
		return nil, fmt.Errorf("feed %s: %w", f.Backend, err)
	}
	return checkedOffers(t)
}

func checkedOffers(t *Table) ([]Offer, error) {
	if err := CheckTable(t); err != nil {
		return nil, err
	}
	return t.Offers, nil
}
