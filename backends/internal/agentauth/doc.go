// Package agentauth authenticates the server's requests to the agents of
// one instance: every request to the shim carries the instance's shim token,
// and every request to a runner's address carries that runner's own token,
// which the transport reads from the shim's task list. Requests to any other
// address (a job's service, probed through the same client) carry nothing
// of ours.
//
// Only backends whose instances answer the shim API (backends/local,
// backends/sshfleet, backends/kubernetes's pod shim) import it; it imports
// agents/api.
package agentauth
