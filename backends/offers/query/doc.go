// Package query turns user-facing offer filters written in dstack's
// resources grammar (`hoist offers` flags, GET /api/v1/offers parameters,
// a spec's normalized resources block) into offers.Query values. Parsing
// is schema's; this package only maps the parsed values.
//
// Importers: cmd/hoist, web and the reconciler.
package query
