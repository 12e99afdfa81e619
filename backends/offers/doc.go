// Package offers answers "what can I rent, and for how much": a catalog of
// cloud GPU and CPU offers in gpuhunt's CSV format, queried by dstack's
// resources grammar, strictly cheapest first.
//
// Offers come from three kinds of sources, combined by a Market:
//
//   - offline catalogs: the snapshot embedded in the binary (Embedded), a
//     directory of PROVIDER.csv files (LoadDir), or gpuhunt's published
//     layout refreshed periodically (Remote), each built into an immutable,
//     indexed Catalog;
//   - hosts hoist already has (the local machine, SSH fleet hosts,
//     provisioned instances), each source a Provider queried live behind a
//     timeout and a short cache, so one failing source never breaks a
//     query.
//
// Open builds a daemon's Market from its flags (--catalog-dir,
// --catalog-url) and keeps remote catalogs refreshed in the background.
//
// GPU names are normalized through a knowledge table (NormalizeGPUName); offers
// with GPUs the table does not know are kept and reported (UnknownGPUs).
//
// The sub-package query maps dstack's resources grammar (parsed by schema)
// to Query values.
//
// Importers: backends and their drivers, the reconciler (planning), web
// (GET /api/v1/offers) and cmd/hoist. This package imports nothing of
// hoist's.
package offers
