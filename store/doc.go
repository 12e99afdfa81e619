// Package store keeps everything hoist knows — what Git asked for, what was
// provisioned, what happened — in one bun data model that runs on embedded
// SQLite (modernc.org/sqlite, pure Go) or on PostgreSQL (pgdialect +
// pgdriver).
//
// Who may import it: reconciler, web and cmd. It imports none of them, nor
// backends; specs are stored as JSON bytes (json.RawMessage), byte for byte.
//
// # Opening
//
//	s, err := store.Open(ctx, dsn, store.Options{Logger: log, Now: clock, SecretKey: key})
//
// A dsn starting with postgres:// selects PostgreSQL; anything else is a
// SQLite file path (or sqlite://path). Open applies the embedded, forward-only
// migrations (migrations/sqlite and migrations/postgres: same IDs) and refuses
// a database written by a newer hoist (ErrSchemaTooNew). On SQLite one process
// owns the file: a second Open of the same file fails fast with ErrInUse. SQLite
// pragmas (WAL, busy timeout, foreign keys, immediate transactions) are in the
// DSN so every pooled connection has them.
//
// # Conventions
//
// IDs are TEXT UUIDv7. Every time written comes from Options.Now in UTC, and
// every time read is UTC. Rows the reconciler changes carry a Version:
// UpdateX(ctx, &row) writes only if the version still matches and returns
// ErrConflict otherwise. Missing rows are ErrNotFound. Project defaults to
// DefaultProject ("main").
//
// # Repositories (methods on *Store)
//
//   - Git, per project (each project has its own source): RecordRevision,
//     GetRevision, ListRevisions (keyed by project and sha: two projects
//     reading one repository see one sha valid in one directory and
//     invalid in the other); GetSyncState, UpdateSyncState, RequestSync
//     (one sync row per project).
//   - Desired state: UpsertResource, GetResource, ListResources,
//     UpdateResource, MarkResourceDeleted, PurgeResource.
//   - Observed state for plans: ObservedState (small columns of the managed
//     resources and the newest run of each name), ResourceSpecs and RunSpecs
//     (the specs of the rows a plan must compare byte for byte);
//     TrySyncLock (one server at a time runs a project's revision
//     pipeline).
//   - Runs and jobs: CreateRun, GetRun, GetRunByName, ListRuns, UpdateRun;
//     CreateJob, GetJob, ListJobs (newest first), ListJobsFiltered, UpdateJob.
//     CreateRunWithJobs writes a run and its jobs in one transaction; a run's
//     SubmitKey is unique, so a retried submission writes nothing. CreateJobs
//     writes one submission's jobs all or none.
//   - Dashboard views (narrow reads for lists): ListRunSummaries (runs
//     without their specs, filtered by status, type or fleet name, paged),
//     CountRunsByStatus, FleetNames, ListOccupancy (unfinished jobs on
//     instances, with status and price, to price spend per run),
//     ListRecentJobs (unfinished or finished since a time).
//   - Infrastructure: Create/Get/GetByName/List/Update for Instance, Fleet,
//     Volume and Gateway; AttachVolume, DetachVolume, ListVolumeAttachments.
//   - History: AddEvent, ListEvents, PruneEvents.
//   - Logs: AppendLogs (one transaction, numbered, per-job byte quota:
//     ErrLogQuota), ReadLogs (ordered by Seq), LogSize, PruneLogs (retention). Lines are
//     stored in S2-compressed chunks of consecutive lines, not a row per line.
//   - Access: CreateUser (global role admin or user), GetUser, ListUsers,
//     DeleteUser (with its tokens and memberships); SetMember, RemoveMember,
//     ListMembers, MembershipsOf, MemberProjects (project roles admin,
//     manager, user, viewer); CreateToken (plaintext returned once, only a
//     SHA-256 hash stored; names unique per user), LookupToken, ListTokens,
//     GetToken, RevokeToken; EnsureProject, ListProjects.
//   - Secrets: SetSecret, GetSecret, ListSecretNames, DeleteSecret —
//     AES-256-GCM at rest; the key comes from LoadSecretKey (HOIST_SECRET_KEY or
//     <data dir>/secret.key); a wrong key fails with ErrSecretKey.
//   - State several servers share (once kept in one process's memory):
//     ConfirmRevision, RevisionConfirmed (held plans); RecordProbe,
//     DeleteProbeCounters (passes in a row, counted in one statement);
//     SeenDelivery (webhook replay protection, atomic across servers);
//     CreateSession, GetSession, DeleteSession (only the cookie's SHA-256 is
//     stored); PutPRPlan, GetPRPlan, ListPRPlans, DeletePRPlan,
//     SetPRPlanComment (the forge comment a plan was posted in, kept across
//     pushes so the next one edits it). PruneExpired deletes
//     what expired and the probe counters of finished jobs.
//   - Backend records: PutBackendRecord, GetBackendRecord,
//     ListBackendRecords, DeleteBackendRecord implement backends.Records —
//     what drivers know about their instances (SSH hosts, pinned host keys,
//     local instances), encrypted under the secret key like secrets, so
//     every server sharing the database must use the same key.
//
// # Leases (work claiming)
//
// Rows of runs, jobs, instances, fleets, volumes and gateways carry a lease
// (lock_token, lock_owner, lock_expires_at, last_processed_at). A worker pool
// calls Claim(ctx, ClaimRequest{Table, Owner, Project, Limit, LeaseFor,
// MinInterval, Where, Args}) to lease due rows (of one project: a job's is
// its run's), Heartbeat (or KeepAlive, whose
// LeaseKeeper heartbeats in the background for as long as the holder works,
// exposes the latest lease and cancels its context when the lease is lost;
// KeepLease is its short form) to extend a lease, and Release to finish (setting last_processed_at). Writes under a
// lease go through UpdateXLeased, WithLease, or Complete (final writes and the
// release in one transaction); all return ErrLeaseLost once the lease expired
// and another worker took the row, so a stale worker never overwrites newer
// work. On PostgreSQL Claim uses SELECT … FOR UPDATE SKIP LOCKED, so several
// hoist servers share the work; on SQLite one server owns the file and the
// same guarded UPDATE is atomic. Lease times come from each server's clock
// (Options.Now), so the servers sharing a Postgres database need synchronized
// clocks (NTP); skew shortens or lengthens leases by the same amount.
package store
