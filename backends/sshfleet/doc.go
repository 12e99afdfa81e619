// Package sshfleet is the backend for SSH fleets (dstack's `type: fleet` with
// `ssh_config`): hosts the user already has, taken over over SSH.
//
// Create connects to the host given in the spec (backends/tunnel: pinned or
// first-contact host key, dial and handshake deadlines, keepalive, proxy
// jump), checks it (Linux, a working Docker Engine, amd64 or arm64), uploads
// the hoist-shim and hoist-runner binaries of the host's architecture into a
// per-instance directory, and starts the shim under a supervisor script
// (setsid, restart loop) that survives disconnects. The shim listens on the
// host's loopback only and demands a token the server makes for the
// instance (kept in the record and in the instance directory, mode 0600);
// the server reaches it through the SSH connection (Connect), whose client
// adds the shim's and the runners' tokens (backends/internal/agentauth). A
// hoist binary of the host's architecture may serve as both agents. Terminate drains the host: it terminates and removes the shim's
// tasks, stops the supervisor and removes the directory.
//
// The backend keeps one record per instance (host, credentials, recorded
// host key, tags) in backends.Records (the store, encrypted at rest), so
// that Describe, Terminate and List work after a server restart and on every
// server sharing the database.
//
// SSHAccess (backends.HostAccess) gives the host's login as the backend
// uses it, keys read and host keys pinned. StartGatewayProcess and
// StopGatewayProcess run hoist's gateway on a host under a supervisor of its
// own, for backends/vm's GatewayHost; Terminate stops it too.
//
// cmd/hoist imports it (one Registry line); backends/vm uses it as a library
// to take cloud VMs over the same way (Create with InstanceSpec.Host, and
// Forget for a VM it deleted); tests of other packages may.
package sshfleet
