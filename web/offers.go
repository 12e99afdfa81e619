package web

import (
	"context"
	"net/url"
	"strings"

	"hoist/backends/offers"
	"hoist/backends/offers/query"
)

// Offers answers offer queries; *offers.Market satisfies it.
type Offers interface {
	// Query returns the offers matching q, strictly cheapest first, with
	// the providers that failed.
	Query(ctx context.Context, q offers.Query) offers.Answer
}

// CatalogOffers adapts an offline catalog to Offers.
type CatalogOffers struct {
	// Catalog is the catalog queried.
	Catalog *offers.Catalog
}

// Query implements Offers.
func (c CatalogOffers) Query(_ context.Context, q offers.Query) offers.Answer {
	return offers.Answer{Offers: c.Catalog.Query(q), Snapshot: c.Catalog.SnapshotDate()}
}

// offerForm is the offers filter as submitted, kept for re-rendering.
type offerForm struct {
	Values  url.Values
	Query   offers.Query
	GroupBy []string
}

// Get returns a submitted field for the form's value attributes.
func (f offerForm) Get(k string) string { return f.Values.Get(k) }

// parseOfferForm reads offers filters in dstack's grammar (see
// query.ParseValues); empty fields, as an HTML form submits them, are
// ignored, and group_by selects a grouped view.
func parseOfferForm(v url.Values) (offerForm, error) {
	f := offerForm{Values: url.Values{}}
	clean := url.Values{}
	for k, vals := range v {
		for _, x := range vals {
			if x = strings.TrimSpace(x); x != "" {
				clean.Add(k, x)
				f.Values.Add(k, x)
			}
		}
	}
	if gb := clean.Get("group_by"); gb != "" {
		keys, err := offers.ParseGroupBy(gb)
		if err != nil {
			return f, err
		}
		f.GroupBy = keys
	}
	q, err := query.ParseValues(clean)
	if err != nil {
		return f, err
	}
	f.Query = q
	return f, nil
}
