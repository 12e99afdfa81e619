// Package tunnel is hoist's SSH client to instances and fleet hosts, built on
// golang.org/x/crypto/ssh: pinned host keys (given keys, known_hosts content,
// or trust on first use with the key returned for the caller to store),
// HostKeyAlgorithms set from the pinned keys, dial and handshake deadlines,
// keepalives, ProxyJump, commands and uploads over sessions, and an
// *http.Client whose connections are direct-tcpip channels of the SSH
// connection, so agent APIs are reached without any public port or local
// listener.
//
// Errors carry backends kinds: an unreachable host is transient (wrapping
// backends.ErrUnreachable), a changed host key or refused authentication is
// stalled.
//
// Backend drivers (backends/sshfleet, VM-based cloud drivers) import it.
package tunnel
