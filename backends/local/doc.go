// Package local is the backend for this host: the machine the server runs on
// is a fleet (named "local" by default) whose instances are slices of the
// host, sized by the query their offer answered (the whole host when the
// query sets no minimum) and admitted while they fit in its CPUs, memory and
// GPUs.
//
// Each instance gets its own shim, run in-process (agents/shim on a
// 127.0.0.1:0 listener, Recover on start) with the host GPUs reserved for
// the instance, which it hands to tasks one at a time, its own state
// directory and
// a token that never leaves this process, so terminating one instance
// drains only its containers. Connect's client adds the shim's and the
// runners' tokens (backends/internal/agentauth). Without a runner binary for
// this host (Config.RunnerMissing) the backend starts and every Create
// fails with what to build. Jobs run in real
// Docker containers on this host's Engine. The instance's size is enforced as
// Docker limits: the connection the server gets (Connect) fills in the CPU
// and memory limits of every task it creates that asks for none.
//
// Instance records live in backends.Records (the store), each naming the
// server whose process runs its shim; other servers sharing the database see
// the instance as running and leave its termination to that server.
//
// A gateway instance (backends.GatewayHost) runs `hoist gateway`
// (Config.GatewayBinary) as a process of its own session that outlives the
// server, its pid file, log, token file and state under the instance's
// directory and its admin socket in a short directory of this user's under
// the temporary directory; a restarted server finds it by pid file and
// health check. A gateway's instance reserves none of the host's
// resources. Terminating the instance stops it.
//
// cmd/hoist imports it (local.New or the "local" Factory); tests of other
// packages may, to run against real Docker.
package local
