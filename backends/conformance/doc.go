// Package conformance is the test kit every backend driver runs against
// itself: its Traits agree with what it is; offers are well formed and
// filterable; create → describe → terminate; terminate twice; create with a
// reused id, and twice at once with a new id; terminate and describe of an
// unknown id; ownership tags present; list-by-tags finds everything created
// (the leak audit); with Options.Peer, that a second server's backend on the
// same records lists and describes every instance (none gone); and, for
// drivers that implement backends.Connector, the shim answers through the
// connection. For a Connector of a backends.RuntimeRunner driver with
// Options.TaskImage, a task of that image runs a job through its runner, as
// the server would: its output and exit code through the connection, then
// terminate and remove, and nothing of it left (Options.TaskLeftovers).
//
// Optional capabilities are checked when the driver has them: a
// backends.VolumeBackend creates, attaches (a device path), detaches and
// deletes a volume on a running instance, and with Options.ExternalVolume
// registers a volume it does not own and leaves it at the provider; a
// backends.PlacementBackend creates a placement group idempotently, creates
// an instance in it, refuses to delete it while in use (a wait) and deletes
// it once empty, twice; with Options.Interrupt, an instance from a spot
// offer is reclaimed and Describe reports it terminated and Interrupted.
//
// Only _test.go files of driver packages import it:
//
//	func TestConformance(t *testing.T) {
//		conformance.Run(t, conformance.Options{Backend: b, Spec: ...})
//	}
package conformance
