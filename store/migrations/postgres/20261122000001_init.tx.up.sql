CREATE TABLE projects (
  id TEXT PRIMARY KEY,
  name TEXT NOT NULL UNIQUE,
  created_at TIMESTAMPTZ NOT NULL
);
--bun:split
CREATE TABLE users (
  id TEXT PRIMARY KEY,
  name TEXT NOT NULL UNIQUE,
  role TEXT NOT NULL CHECK (role IN ('admin', 'user', 'viewer')),
  disabled BOOLEAN NOT NULL DEFAULT FALSE,
  created_at TIMESTAMPTZ NOT NULL
);
--bun:split
CREATE TABLE api_tokens (
  id TEXT PRIMARY KEY,
  user_id TEXT NOT NULL REFERENCES users (id) ON DELETE CASCADE,
  name TEXT NOT NULL DEFAULT '',
  token_hash TEXT NOT NULL UNIQUE,
  created_at TIMESTAMPTZ NOT NULL,
  expires_at TIMESTAMPTZ,
  last_used_at TIMESTAMPTZ,
  revoked BOOLEAN NOT NULL DEFAULT FALSE
);
--bun:split
CREATE TABLE sources (
  id TEXT PRIMARY KEY,
  project TEXT NOT NULL,
  name TEXT NOT NULL,
  url TEXT NOT NULL DEFAULT '',
  ref TEXT NOT NULL DEFAULT '',
  path TEXT NOT NULL DEFAULT '',
  created_at TIMESTAMPTZ NOT NULL,
  updated_at TIMESTAMPTZ NOT NULL,
  UNIQUE (project, name)
);
--bun:split
CREATE TABLE revisions (
  sha TEXT PRIMARY KEY,
  source_id TEXT NOT NULL DEFAULT '',
  author TEXT NOT NULL DEFAULT '',
  message TEXT NOT NULL DEFAULT '',
  committed_at TIMESTAMPTZ,
  seen_at TIMESTAMPTZ NOT NULL,
  valid BOOLEAN NOT NULL DEFAULT FALSE,
  errors TEXT
);
--bun:split
CREATE INDEX revisions_seen_at_idx ON revisions (seen_at);
--bun:split
CREATE TABLE sync_state (
  id INTEGER PRIMARY KEY CHECK (id = 1),
  latest_sha TEXT NOT NULL DEFAULT '',
  applied_sha TEXT NOT NULL DEFAULT '',
  status TEXT NOT NULL DEFAULT 'syncing' CHECK (status IN ('synced', 'syncing', 'invalid')),
  errors TEXT,
  suspended BOOLEAN NOT NULL DEFAULT FALSE,
  requested BIGINT NOT NULL DEFAULT 0,
  last_synced_at TIMESTAMPTZ,
  updated_at TIMESTAMPTZ,
  version BIGINT NOT NULL DEFAULT 1
);
--bun:split
CREATE TABLE resources (
  id TEXT PRIMARY KEY,
  project TEXT NOT NULL,
  kind TEXT NOT NULL,
  name TEXT NOT NULL,
  spec TEXT,
  spec_hash TEXT NOT NULL DEFAULT '',
  file TEXT NOT NULL DEFAULT '',
  revision TEXT NOT NULL DEFAULT '',
  applied_revision TEXT NOT NULL DEFAULT '',
  status TEXT NOT NULL DEFAULT '',
  status_message TEXT NOT NULL DEFAULT '',
  suspended BOOLEAN NOT NULL DEFAULT FALSE,
  deleted BOOLEAN NOT NULL DEFAULT FALSE,
  deleted_at TIMESTAMPTZ,
  version BIGINT NOT NULL DEFAULT 1,
  created_at TIMESTAMPTZ NOT NULL,
  updated_at TIMESTAMPTZ NOT NULL,
  UNIQUE (project, kind, name)
);
--bun:split
CREATE TABLE fleets (
  id TEXT PRIMARY KEY,
  project TEXT NOT NULL,
  name TEXT NOT NULL,
  spec TEXT,
  spec_hash TEXT NOT NULL DEFAULT '',
  revision TEXT NOT NULL DEFAULT '',
  status TEXT NOT NULL CHECK (status IN ('submitted', 'active', 'terminating', 'terminated', 'failed')),
  status_message TEXT NOT NULL DEFAULT '',
  consolidation_attempt INTEGER NOT NULL DEFAULT 0,
  last_consolidated_at TIMESTAMPTZ,
  deleted BOOLEAN NOT NULL DEFAULT FALSE,
  removed_from_git BOOLEAN NOT NULL DEFAULT FALSE,
  version BIGINT NOT NULL DEFAULT 1,
  created_at TIMESTAMPTZ NOT NULL,
  updated_at TIMESTAMPTZ NOT NULL,
  lock_token TEXT,
  lock_owner TEXT,
  lock_expires_at TIMESTAMPTZ,
  last_processed_at TIMESTAMPTZ
);
--bun:split
CREATE INDEX fleets_name_idx ON fleets (project, name);
--bun:split
CREATE INDEX fleets_due_idx ON fleets (last_processed_at);
--bun:split
CREATE TABLE instances (
  id TEXT PRIMARY KEY,
  project TEXT NOT NULL,
  name TEXT NOT NULL,
  fleet_id TEXT REFERENCES fleets (id),
  instance_num INTEGER NOT NULL DEFAULT 0,
  backend TEXT NOT NULL DEFAULT '',
  region TEXT NOT NULL DEFAULT '',
  offer TEXT,
  price DOUBLE PRECISION NOT NULL DEFAULT 0,
  hostname TEXT NOT NULL DEFAULT '',
  ssh_port INTEGER NOT NULL DEFAULT 0,
  ssh_user TEXT NOT NULL DEFAULT '',
  ports TEXT,
  host_key TEXT NOT NULL DEFAULT '',
  backend_data TEXT,
  status TEXT NOT NULL CHECK (status IN ('pending', 'provisioning', 'idle', 'busy', 'terminating', 'terminated')),
  status_message TEXT NOT NULL DEFAULT '',
  termination_reason TEXT NOT NULL DEFAULT '',
  ownership_tags TEXT,
  unreachable BOOLEAN NOT NULL DEFAULT FALSE,
  health TEXT NOT NULL DEFAULT '',
  last_seen_at TIMESTAMPTZ,
  started_at TIMESTAMPTZ,
  finished_at TIMESTAMPTZ,
  total_blocks INTEGER NOT NULL DEFAULT 1,
  busy_blocks INTEGER NOT NULL DEFAULT 0,
  deleted BOOLEAN NOT NULL DEFAULT FALSE,
  version BIGINT NOT NULL DEFAULT 1,
  created_at TIMESTAMPTZ NOT NULL,
  updated_at TIMESTAMPTZ NOT NULL,
  lock_token TEXT,
  lock_owner TEXT,
  lock_expires_at TIMESTAMPTZ,
  last_processed_at TIMESTAMPTZ
);
--bun:split
CREATE INDEX instances_fleet_idx ON instances (fleet_id);
--bun:split
CREATE INDEX instances_due_idx ON instances (last_processed_at);
--bun:split
CREATE TABLE runs (
  id TEXT PRIMARY KEY,
  project TEXT NOT NULL,
  name TEXT NOT NULL,
  type TEXT NOT NULL CHECK (type IN ('task', 'service', 'dev-environment')),
  resource_kind TEXT NOT NULL DEFAULT '',
  resource_name TEXT NOT NULL DEFAULT '',
  spec TEXT,
  spec_hash TEXT NOT NULL DEFAULT '',
  revision TEXT NOT NULL DEFAULT '',
  status TEXT NOT NULL CHECK (status IN ('pending', 'submitted', 'provisioning', 'running', 'terminating', 'terminated', 'failed', 'done')),
  status_message TEXT NOT NULL DEFAULT '',
  termination_reason TEXT NOT NULL DEFAULT '',
  fleet_id TEXT NOT NULL DEFAULT '',
  priority INTEGER NOT NULL DEFAULT 0,
  submitted_at TIMESTAMPTZ NOT NULL,
  finished_at TIMESTAMPTZ,
  resubmission_attempt INTEGER NOT NULL DEFAULT 0,
  next_triggered_at TIMESTAMPTZ,
  deployment_num INTEGER NOT NULL DEFAULT 0,
  deleted BOOLEAN NOT NULL DEFAULT FALSE,
  removed_from_git BOOLEAN NOT NULL DEFAULT FALSE,
  version BIGINT NOT NULL DEFAULT 1,
  created_at TIMESTAMPTZ NOT NULL,
  updated_at TIMESTAMPTZ NOT NULL,
  lock_token TEXT,
  lock_owner TEXT,
  lock_expires_at TIMESTAMPTZ,
  last_processed_at TIMESTAMPTZ
);
--bun:split
CREATE INDEX runs_name_idx ON runs (project, name, submitted_at);
--bun:split
CREATE INDEX runs_status_idx ON runs (status);
--bun:split
CREATE INDEX runs_due_idx ON runs (last_processed_at);
--bun:split
CREATE TABLE jobs (
  id TEXT PRIMARY KEY,
  run_id TEXT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
  run_name TEXT NOT NULL DEFAULT '',
  job_name TEXT NOT NULL DEFAULT '',
  job_num INTEGER NOT NULL DEFAULT 0,
  replica_num INTEGER NOT NULL DEFAULT 0,
  submission_num INTEGER NOT NULL DEFAULT 0,
  deployment_num INTEGER NOT NULL DEFAULT 0,
  spec TEXT,
  status TEXT NOT NULL CHECK (status IN ('submitted', 'provisioning', 'pulling', 'running', 'terminating', 'terminated', 'aborted', 'failed', 'done')),
  status_message TEXT NOT NULL DEFAULT '',
  termination_reason TEXT NOT NULL DEFAULT '',
  termination_message TEXT NOT NULL DEFAULT '',
  exit_code INTEGER,
  instance_id TEXT NOT NULL DEFAULT '',
  backend TEXT NOT NULL DEFAULT '',
  shim_task_id TEXT NOT NULL DEFAULT '',
  runner_host TEXT NOT NULL DEFAULT '',
  runner_port INTEGER NOT NULL DEFAULT 0,
  provisioning_data TEXT,
  runtime_data TEXT,
  log_cursor BIGINT NOT NULL DEFAULT 0,
  graceful_termination_attempts INTEGER,
  remove_at TIMESTAMPTZ,
  submitted_at TIMESTAMPTZ NOT NULL,
  started_at TIMESTAMPTZ,
  finished_at TIMESTAMPTZ,
  version BIGINT NOT NULL DEFAULT 1,
  created_at TIMESTAMPTZ NOT NULL,
  updated_at TIMESTAMPTZ NOT NULL,
  lock_token TEXT,
  lock_owner TEXT,
  lock_expires_at TIMESTAMPTZ,
  last_processed_at TIMESTAMPTZ
);
--bun:split
CREATE INDEX jobs_run_idx ON jobs (run_id, submitted_at);
--bun:split
CREATE INDEX jobs_status_idx ON jobs (status);
--bun:split
CREATE INDEX jobs_due_idx ON jobs (last_processed_at);
--bun:split
CREATE TABLE volumes (
  id TEXT PRIMARY KEY,
  project TEXT NOT NULL,
  name TEXT NOT NULL,
  spec TEXT,
  spec_hash TEXT NOT NULL DEFAULT '',
  revision TEXT NOT NULL DEFAULT '',
  backend TEXT NOT NULL DEFAULT '',
  region TEXT NOT NULL DEFAULT '',
  external_id TEXT NOT NULL DEFAULT '',
  size_gb DOUBLE PRECISION NOT NULL DEFAULT 0,
  provisioning_data TEXT,
  status TEXT NOT NULL CHECK (status IN ('submitted', 'provisioning', 'active', 'failed')),
  status_message TEXT NOT NULL DEFAULT '',
  to_be_deleted BOOLEAN NOT NULL DEFAULT FALSE,
  deleted BOOLEAN NOT NULL DEFAULT FALSE,
  removed_from_git BOOLEAN NOT NULL DEFAULT FALSE,
  last_job_processed_at TIMESTAMPTZ,
  version BIGINT NOT NULL DEFAULT 1,
  created_at TIMESTAMPTZ NOT NULL,
  updated_at TIMESTAMPTZ NOT NULL,
  lock_token TEXT,
  lock_owner TEXT,
  lock_expires_at TIMESTAMPTZ,
  last_processed_at TIMESTAMPTZ
);
--bun:split
CREATE INDEX volumes_name_idx ON volumes (project, name);
--bun:split
CREATE INDEX volumes_due_idx ON volumes (last_processed_at);
--bun:split
CREATE TABLE volume_attachments (
  volume_id TEXT NOT NULL REFERENCES volumes (id) ON DELETE CASCADE,
  instance_id TEXT NOT NULL REFERENCES instances (id) ON DELETE CASCADE,
  attachment_data TEXT,
  created_at TIMESTAMPTZ NOT NULL,
  PRIMARY KEY (volume_id, instance_id)
);
--bun:split
CREATE TABLE gateways (
  id TEXT PRIMARY KEY,
  project TEXT NOT NULL,
  name TEXT NOT NULL,
  spec TEXT,
  spec_hash TEXT NOT NULL DEFAULT '',
  revision TEXT NOT NULL DEFAULT '',
  backend TEXT NOT NULL DEFAULT '',
  region TEXT NOT NULL DEFAULT '',
  hostname TEXT NOT NULL DEFAULT '',
  ip_address TEXT NOT NULL DEFAULT '',
  ssh_port INTEGER NOT NULL DEFAULT 0,
  host_key TEXT NOT NULL DEFAULT '',
  backend_data TEXT,
  ownership_tags TEXT,
  status TEXT NOT NULL CHECK (status IN ('submitted', 'provisioning', 'running', 'failed')),
  status_message TEXT NOT NULL DEFAULT '',
  deleted BOOLEAN NOT NULL DEFAULT FALSE,
  removed_from_git BOOLEAN NOT NULL DEFAULT FALSE,
  version BIGINT NOT NULL DEFAULT 1,
  created_at TIMESTAMPTZ NOT NULL,
  updated_at TIMESTAMPTZ NOT NULL,
  lock_token TEXT,
  lock_owner TEXT,
  lock_expires_at TIMESTAMPTZ,
  last_processed_at TIMESTAMPTZ
);
--bun:split
CREATE INDEX gateways_name_idx ON gateways (project, name);
--bun:split
CREATE INDEX gateways_due_idx ON gateways (last_processed_at);
--bun:split
CREATE TABLE events (
  id TEXT PRIMARY KEY,
  time TIMESTAMPTZ NOT NULL,
  object_kind TEXT NOT NULL,
  object_name TEXT NOT NULL DEFAULT '',
  object_id TEXT NOT NULL DEFAULT '',
  type TEXT NOT NULL,
  message TEXT NOT NULL DEFAULT '',
  revision TEXT NOT NULL DEFAULT ''
);
--bun:split
CREATE INDEX events_object_idx ON events (object_kind, object_name, id);
--bun:split
CREATE INDEX events_object_id_idx ON events (object_id, id);
--bun:split
CREATE INDEX events_revision_idx ON events (revision, id);
--bun:split
CREATE TABLE job_log_state (
  job_id TEXT PRIMARY KEY,
  last_seq BIGINT NOT NULL DEFAULT 0,
  bytes BIGINT NOT NULL DEFAULT 0
);
--bun:split
CREATE TABLE job_logs (
  job_id TEXT NOT NULL,
  seq BIGINT NOT NULL,
  time TIMESTAMPTZ NOT NULL,
  stream TEXT NOT NULL,
  data BYTEA NOT NULL,
  PRIMARY KEY (job_id, seq)
);
--bun:split
CREATE TABLE secrets (
  project TEXT NOT NULL,
  name TEXT NOT NULL,
  key_id TEXT NOT NULL,
  nonce BYTEA NOT NULL,
  ciphertext BYTEA NOT NULL,
  created_at TIMESTAMPTZ NOT NULL,
  updated_at TIMESTAMPTZ NOT NULL,
  PRIMARY KEY (project, name)
);
--bun:split
CREATE TABLE offers_cache (
  key TEXT PRIMARY KEY,
  data TEXT NOT NULL,
  expires_at TIMESTAMPTZ NOT NULL,
  created_at TIMESTAMPTZ NOT NULL
);
