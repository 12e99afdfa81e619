// Package hostinfo describes the machine it runs on: operating system,
// architecture, CPUs, memory, the size of one file system, addresses and
// GPUs (from nvidia-smi or amd-smi when present), as an api.HostInfo.
//
// It is hoist's one host probe: the shim serves it at GET /api/v1/host
// (which is how the SSH fleet backend learns a remote host's resources) and
// the local backend calls it for this host. It imports agents/api and
// nothing else of hoist.
package hostinfo
