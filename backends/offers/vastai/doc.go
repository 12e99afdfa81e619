// Package vastai is an online offers.Provider for the vast.ai marketplace:
// it searches vast.ai's public bundle listing with the query's limits and
// turns each machine into an on-demand offer and a spot (interruptible,
// minimum bid) offer. It only lists offers; renting is a backend's job.
//
// Importers: cmd/hoist (to pass it to offers.MarketConfig.Online).
package vastai
