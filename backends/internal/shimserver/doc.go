// Package shimserver serves the shim HTTP API (agents/api, as agents/shim
// serves it) inside the server, for the drivers whose tasks are the
// provider's containers (backends/kubernetes: a pod per task;
// backends/podcloud: a RunPod or Vast.ai pod per task): Handler answers the
// API from a Tasks, and InProcess carries a Conn's requests for the shim's
// host to it without a socket.
//
// Only those drivers import it; it imports agents/api.
package shimserver
