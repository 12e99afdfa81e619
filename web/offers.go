package web

import (
	"context"

	"hoist/backends/offers"
)

// Offers answers offer queries (the catalog plus live providers).
type Offers interface {
	// Query returns the offers matching q, cheapest first.
	Query(ctx context.Context, q offers.Query) ([]offers.Offer, error)
}

// CatalogOffers adapts an offline catalog to Offers.
type CatalogOffers struct {
	// Catalog is the catalog queried.
	Catalog *offers.Catalog
}

// Query implements Offers.
func (c CatalogOffers) Query(_ context.Context, q offers.Query) ([]offers.Offer, error) {
	return c.Catalog.Query(q), nil
}
