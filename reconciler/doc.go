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
// # Files
//
// One file per object, each holding what its name says:
//
//   - controller.go: Config, Deps, New, Run, the worker loop, resync,
//     leases and events;
//   - sync.go: revisions — the pipeline (syncOnce), the sync loop, plans
//     (PlanFS, PlanRevision), confirmations, re-applying an older
//     revision, and the status /api/v1/sync reports;
//   - observe.go: the observed state a revision is planned against, read
//     through the store (store.ObservedState) and compared with the
//     desired specs; cost.go prices it;
//   - apply.go: carrying out a plan's steps, one kind at a time;
//   - runs.go: applying run steps and the run worker (retries, schedules,
//     service scaling and rolling deployments); runspec.go decodes a run's
//     spec and gives the part of it each job runs (a task's node groups);
//     lifecycle.go maps statuses and termination reasons;
//   - jobs.go: the job worker (container task, runner submission, finish);
//     cluster.go: the nodes of a multi-node run waiting for each other
//     (startup_order), their cluster (api.ClusterInfo), stop_criteria;
//     noderefs.go: the nodes' IPs in a task's commands;
//     clusterssh.go: the SSH key of a submission's nodes, kept by its master;
//   - placement.go: placing a job on an instance of a matching fleet,
//     waiting for a fleet's instances, the offers a job tried; gang.go:
//     placing the jobs of a multi-node run together or not at all, on one
//     `placement: cluster` fleet, each on an instance fitting its node
//     group's resources (growing it by the missing instances
//     first, waiting while they provision or are busy, failing when no
//     fleet can ever hold them); gangorder.go: a waiting gang's claim on
//     its fleet's instances against later jobs (by priority, then
//     submission), and waking it when one is ready or free;
//   - instances.go: the instance worker (provision, observe, idle reaping,
//     terminate), giving up an offer that cannot be had (no capacity, no
//     boot within the provisioning timeout), an instance the provider
//     reclaimed (spot interruption) or lost, and the connections to
//     instances' shims;
//   - fleets.go: applying fleet steps (SSH hosts, backend fleets at
//     nodes.target, the fleet of this host), the offer walk of a fleet's
//     instances (cheapest first, past the offers that failed, at most 25)
//     and growing a fleet for a job;
//   - budget.go: the project's budget (Config.Budget) at provisioning: an
//     instance whose price would take the project past it is not created,
//     and the job, gang or fleet asking waits, saying so; the spend per
//     hour and month to date it is checked against;
//   - placementgroups.go: the placement groups of `placement: cluster`
//     fleets, created before their first instance and deleted after
//     their last;
//   - volumes.go: applying volume steps; the network volumes of jobs
//     (placement at the volume's backend and region, attach before the task,
//     detach after it) and the volume sweep (auto_cleanup_duration);
//   - gateways.go: applying gateway steps, the gateway worker (its
//     instance, the gateway process, its configuration) and the checks of
//     gateway references; gatewaystats.go: gateways' traffic for the
//     autoscaler;
//   - pump.go: copying a running job's output into the store;
//   - probe.go: readiness probes of service replicas;
//   - traits.go: finding backends by their traits (backends.Traits) —
//     the backend SSH fleets use, the backend of this host; nothing here
//     compares backend names or types with "ssh" or "local";
//   - secrets.go, entrypoint.go, retention.go, leaks.go: secret
//     resolution and masking, entrypoint parsing, retention of events and
//     logs, the leak audit.
//
// The reconciler speaks no SQL: every read and lock goes through store
// methods.
//
// Only cmd/hoist imports this package; the web server reaches it through the
// small interfaces it declares itself.
package reconciler
