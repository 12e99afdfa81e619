// Package hostoffer turns a host's description (an api.HostInfo, from
// agents/hostinfo run in-process or from a shim's GET /api/v1/host) into the
// offer a backend reports for the whole host.
//
// Only backends that run hoist's shim (backends/local, backends/sshfleet)
// import it; it imports agents/api and backends/offers.
package hostoffer
