package arm

import (
	"slices"
	"strings"
	"sync"

	"hoist/backends/offers"
)

// fallbackPrices are on-demand USD/hour of a few sizes (Linux, pay as you
// go, eastus, from https://azure.microsoft.com/pricing/details/virtual-machines/linux/),
// sold in every location of Regions whatever the catalog says; spot is 30 %
// of on demand.
var fallbackPrices = map[string]float64{
	"Standard_B1s":             0.0104,
	"Standard_D2s_v3":          0.096,
	"Standard_D4s_v3":          0.192,
	"Standard_D8s_v3":          0.384,
	"Standard_E4s_v4":          0.252,
	"Standard_NC4as_T4_v3":     0.526,
	"Standard_NC6s_v3":         3.06,
	"Standard_NC24ads_A100_v4": 3.673,
}

type priceKey struct {
	size, location string
	spot           bool
}

// catalogPrices indexes the embedded catalog's azure rows; empty when the
// catalog has none.
var catalogPrices = sync.OnceValue(func() map[priceKey]float64 {
	out := map[priceKey]float64{}
	c, err := offers.Embedded()
	if err != nil {
		return out
	}
	for _, o := range c.All() {
		if o.Backend != name {
			continue
		}
		k := priceKey{o.Instance, strings.ToLower(o.Region), o.Spot}
		if p, ok := out[k]; !ok || o.Price < p {
			out[k] = o.Price
		}
	}
	return out
})

// priceOf returns the price of a VM size in a location; false when the
// size is not sold there (the PUT fails with SkuNotAvailable). The
// catalog's azure rows decide; sizes of fallbackPrices are also sold in
// every location of Regions, so that tests need no particular catalog.
func priceOf(size, location string, spot bool) (float64, bool) {
	cat := catalogPrices()
	if p, ok := cat[priceKey{size, location, spot}]; ok {
		return p, true
	}
	p, ok := cat[priceKey{size, location, false}]
	if !ok {
		p, ok = fallbackPrices[size]
		ok = ok && slices.Contains(Regions, location)
	}
	if !ok {
		return 0, false
	}
	if spot {
		p *= 0.3
	}
	return p, true
}
