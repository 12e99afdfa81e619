// Package agenthttp holds what the shim's and the runner's HTTP servers
// share: JSON answers, the bearer-token gate in front of every route and
// the bound on long-poll waits.
//
// agents/shim and agents/runner import it; it imports agents/api.
package agenthttp
