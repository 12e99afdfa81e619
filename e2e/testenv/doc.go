// Package testenv gives tests of every hoist package the real dependencies they
// run against: the local busybox test image on this machine's Docker Engine,
// (from the store's tests) a throwaway PostgreSQL database, throwaway
// OpenSSH servers on loopback addresses (StartSSHD), the cloud simulator
// (StartCloudSim), the real single-node Kubernetes cluster of
// kubernetes.sh (Kubernetes), and the throwaway MinIO of minio.sh, an
// S3-compatible server for the S3 artifact store (S3).
//
// Every test that needs something outside Go asks for it through Require (a
// program) or ends through Missing: on a developer's machine a missing
// dependency skips the test with a loud "SKIP:" message, and under CI=true it
// fails the test, so CI never passes by skipping.
//
// Only _test.go files may import it; no binary does.
package testenv
