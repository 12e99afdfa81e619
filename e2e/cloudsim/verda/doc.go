// Package verda simulates Verda's public REST API (formerly DataCrunch,
// https://api.verda.com/v1, documented at https://docs.verda.com/api) for
// the cloud simulator (e2e/cloudsim): the OAuth2 client-credentials token
// endpoint, instance availability, SSH keys, startup scripts and instances,
// enough for hoist's verda driver.
//
// Wire formats follow the public API: JSON bodies, ids created by POST
// answered as plain text, errors as {"code","message"} with the codes
// invalid_request (400), unauthorized_request (401), forbidden_action
// (403), not_found (404) and service_unavailable (503). Two answers are the
// simulator's choice where the public documentation says nothing exact: a
// rate limit is 429 {"code":"too_many_requests"}, and an instance type out
// of capacity in a location is 503 service_unavailable with a message
// saying so.
//
// Verda has no tags: what an instance carries is its hostname and
// description, and the simulator keeps them as given.
//
// It is test support: only e2e/cloudsim and tests import it.
package verda
