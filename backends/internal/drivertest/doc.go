// Package drivertest holds what the tests of the drivers (sshfleet and the
// cloud-VM drivers aws, gcp, azure) and of the cloud-VM engine (vm) share: a store-backed
// backends.Records, backends.Deps with the embedded catalog and the agents
// built for the test, the simulator's backend entry as a backends.Config,
// and the simulator started with its disks detached at the end.
//
// Only _test.go files under backends/ import it.
package drivertest
