// Package agenthttp holds what the shim's and the runner's HTTP servers
// share: JSON answers and the bearer-token gate in front of every route.
//
// agents/shim and agents/runner import it; it imports agents/api.
package agenthttp
