// Package testenv gives tests of every hoist package the real dependencies they
// run against: the local busybox test image on this machine's Docker Engine,
// (from the store's tests) a throwaway PostgreSQL database, and throwaway
// OpenSSH servers on loopback addresses (StartSSHD).
//
// Only _test.go files may import it; no binary does.
package testenv
