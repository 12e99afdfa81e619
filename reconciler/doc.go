// Package reconciler turns each Git revision of the spec repository into
// converged runs, fleets, volumes and gateways, and keeps them converged.
//
// The Controller owns three loops:
//
//   - the revision pipeline: for each new revision of the tracked branch it
//     loads and validates every spec (hoist/schema); any error rejects the
//     whole revision and leaves everything live untouched; a valid revision
//     is recorded, planned with plan.Compute and applied to the store's
//     desired-state rows;
//   - per-kind workers (runs, jobs, fleets, instances) that drive each row
//     through dstack's lifecycle (src/dstack/_internal/core/models/runs.py
//     and instances.py) by calling backends and the agents; every external call is idempotent and its result is persisted
//     before the next step, so a crash at any point resumes without
//     duplicates;
//   - a periodic resync with jitter that re-queues every active row, so
//     nothing depends on a nudge having arrived.
//
// A commit, webhook or API action wakes the right worker at once through a
// keyed queue (hoist/reconciler/queue); rows are additionally claimed
// through the store's leases, so several servers on one PostgreSQL share the
// work without processing a row twice.
//
// Secrets (`${{ secrets.NAME }}` in env values, registry_auth and SSH fleet
// identity_file, and bare `env: [NAME]`) are resolved from the store when a
// job is placed, its container created and its job submitted, and when an
// SSH host is provisioned; a missing one fails the job before it starts.
// Their values are masked in job output before it is stored.
//
// Only cmd/hoist imports this package; the web server reaches it through the
// small interfaces it declares itself.
package reconciler
