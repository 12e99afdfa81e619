package main

import (
	"reflect"
	"testing"

	"hoist/reconciler"
	"hoist/web"
)

// TestWebService_copiesModelTemplateAndHeaderKeyedLimits: the route the
// proxy gets carries a tgi model's chat template and end of sequence token
// and a rate limit's header.
func TestWebService_copiesModelTemplateAndHeaderKeyedLimits(t *testing.T) {
	got := webService(reconciler.ServiceRoute{
		Project: "main", Run: "llm", Auth: true,
		Model:      &reconciler.ServiceModel{Name: "m", Format: "tgi", ChatTemplate: "{{ messages }}", EOSToken: "</s>"},
		RateLimits: []reconciler.ServiceRateLimit{{Prefix: "/", Header: "X-Api-Key", RPS: 2, Burst: 3}},
	})
	want := web.Service{
		Project: "main", Run: "llm", Auth: true,
		Model:      &web.ServiceModel{Name: "m", Format: "tgi", ChatTemplate: "{{ messages }}", EOSToken: "</s>"},
		RateLimits: []web.ServiceRateLimit{{Prefix: "/", Header: "X-Api-Key", RPS: 2, Burst: 3}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v (model %+v), want %+v (model %+v)", got, got.Model, want, want.Model)
	}
}
