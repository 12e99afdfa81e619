// Package plan computes what hoist must do to make observed state match a
// revision's desired state.
//
// Compute is pure: it does no I/O, reads no clock (now is passed in) and
// returns its steps in a deterministic order, so that `hoist plan`, the
// pull-request preview and the revision pipeline all see the same answer for
// the same inputs. Each step is one of create, update (in place), replace,
// delete or no-op, with the reason and the changed fields. Which fields a
// resource may change in place follows dstack's rules (src/dstack/_internal/server/services/runs/spec.py
// and services/fleets.py::_check_can_update_fleet_configuration).
//
// Safety lives here too: a delete of a volume or gateway is held for
// confirmation unless its last applied spec opted in to pruning, and a plan
// that would delete more than half of the managed resources (or all of them)
// is held as a whole. So is a plan that raises the estimated spend per
// hour past its project's budget (Options.Budget), or raises it once the
// month's budget is spent (budget.go).
//
// The reconciler, the web server and cmd/hoist may import this package. It
// imports only hoist/schema.
package plan
