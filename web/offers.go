package web

import (
	"context"
	"net/http"
	"net/url"
	"sort"
	"strings"

	"github.com/labstack/echo/v5"

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

// offerView is one offer as the API returns it, with the price per GPU.
type offerView struct {
	offers.Offer
	PricePerGPU *float64 `json:"price_per_gpu"`
}

func offerViews(os []offers.Offer) []offerView {
	out := make([]offerView, len(os))
	for i, o := range os {
		out[i] = offerView{Offer: o}
		if o.GPUCount > 0 {
			p := o.Price / float64(o.GPUCount)
			out[i].PricePerGPU = &p
		}
	}
	return out
}

func (s *Server) apiOffers(c *echo.Context) error {
	if s.deps.Offers == nil {
		return errUnavailable
	}
	form, err := parseOfferForm(c.QueryParams())
	if err != nil {
		return echo.NewHTTPError(http.StatusBadRequest, err.Error())
	}
	if form.Query.Limit == 0 {
		form.Query.Limit = 100
	}
	ans := s.deps.Offers.Query(c.Request().Context(), form.Query)
	if len(form.GroupBy) > 0 {
		return c.JSON(http.StatusOK, nonNil(offers.GroupBy(ans.Offers, form.GroupBy)))
	}
	return c.JSON(http.StatusOK, offerViews(ans.Offers))
}

// offersPageLimit bounds the ungrouped offers table.
const offersPageLimit = 200

func (s *Server) pageOffers(c *echo.Context) error {
	d := offersData{OK: s.deps.Offers != nil}
	if !d.OK {
		return s.render(c, http.StatusOK, offersPage(s.viewer(c), d))
	}
	form, err := parseOfferForm(c.QueryParams())
	d.Form = form
	status := http.StatusOK
	if err != nil {
		d.Problem = err.Error()
		status = http.StatusBadRequest
		return s.render(c, status, offersPage(s.viewer(c), d))
	}
	q := form.Query
	if len(form.GroupBy) == 0 && (q.Limit == 0 || q.Limit > offersPageLimit) {
		q.Limit = offersPageLimit + 1
	}
	ans := s.deps.Offers.Query(c.Request().Context(), q)
	d.Snapshot = ans.Snapshot
	for name := range ans.Failed {
		d.Failed = append(d.Failed, name)
	}
	sort.Strings(d.Failed)
	if len(form.GroupBy) > 0 {
		d.Groups = offers.GroupBy(ans.Offers, form.GroupBy)
	} else {
		os := ans.Offers
		if len(os) > offersPageLimit {
			os, d.Limited = os[:offersPageLimit], true
		}
		d.Offers = offerViews(os)
	}
	return s.render(c, status, offersPage(s.viewer(c), d))
}
