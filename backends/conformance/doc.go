// Package conformance is the test kit every backend driver runs against
// itself: its Traits agree with what it is; offers are well formed and
// filterable; create → describe →
// terminate; terminate twice; create with a reused id, and twice at once with
// a new id; terminate and describe of an unknown id; ownership tags present; list-by-tags finds everything
// created (the leak audit); with Options.Peer, that a second server's
// backend on the same records lists and describes every instance (none
// gone); and, for drivers that implement
// backends.Connector, the shim answers through the connection.
//
// Only _test.go files of driver packages import it:
//
//	func TestConformance(t *testing.T) {
//		conformance.Run(t, conformance.Options{Backend: b, Spec: ...})
//	}
package conformance
