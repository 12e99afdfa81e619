-- Several projects in one server: each has its own Git source, so the
-- revisions it saw (the same sha may be valid in one project's directory and
-- invalid in another's), its sync state, its held plans' confirmations and its
-- events are kept per project. Existing rows belong to project main. SQLite
-- cannot change a primary key, so revisions, sync_state and
-- plan_confirmations are rebuilt (https://www.sqlite.org/lang_altertable.html#otheralter).
CREATE TABLE revisions_new (
  project TEXT NOT NULL DEFAULT 'main',
  sha TEXT NOT NULL,
  source_id TEXT NOT NULL DEFAULT '',
  author TEXT NOT NULL DEFAULT '',
  message TEXT NOT NULL DEFAULT '',
  committed_at TIMESTAMP,
  seen_at TIMESTAMP NOT NULL,
  valid BOOLEAN NOT NULL DEFAULT FALSE,
  errors TEXT,
  plan TEXT,
  warnings TEXT,
  PRIMARY KEY (project, sha)
);
--bun:split
INSERT INTO revisions_new (project, sha, source_id, author, message, committed_at, seen_at, valid, errors, plan, warnings)
SELECT 'main', sha, source_id, author, message, committed_at, seen_at, valid, errors, plan, warnings FROM revisions;
--bun:split
DROP TABLE revisions;
--bun:split
ALTER TABLE revisions_new RENAME TO revisions;
--bun:split
CREATE INDEX revisions_seen_at_idx ON revisions (project, seen_at);
--bun:split
CREATE TABLE sync_state_new (
  project TEXT PRIMARY KEY,
  latest_sha TEXT NOT NULL DEFAULT '',
  applied_sha TEXT NOT NULL DEFAULT '',
  status TEXT NOT NULL DEFAULT 'syncing' CHECK (status IN ('synced', 'syncing', 'invalid')),
  errors TEXT,
  suspended BOOLEAN NOT NULL DEFAULT FALSE,
  requested BIGINT NOT NULL DEFAULT 0,
  last_synced_at TIMESTAMP,
  updated_at TIMESTAMP,
  version BIGINT NOT NULL DEFAULT 1,
  held BOOLEAN NOT NULL DEFAULT FALSE,
  held_reasons TEXT
);
--bun:split
INSERT INTO sync_state_new (project, latest_sha, applied_sha, status, errors, suspended, requested, last_synced_at, updated_at, version, held, held_reasons)
SELECT 'main', latest_sha, applied_sha, status, errors, suspended, requested, last_synced_at, updated_at, version, held, held_reasons FROM sync_state;
--bun:split
DROP TABLE sync_state;
--bun:split
ALTER TABLE sync_state_new RENAME TO sync_state;
--bun:split
CREATE TABLE plan_confirmations_new (
  project TEXT NOT NULL DEFAULT 'main',
  revision TEXT NOT NULL,
  created_at TIMESTAMP NOT NULL,
  expires_at TIMESTAMP NOT NULL,
  PRIMARY KEY (project, revision)
);
--bun:split
INSERT INTO plan_confirmations_new (project, revision, created_at, expires_at)
SELECT 'main', revision, created_at, expires_at FROM plan_confirmations;
--bun:split
DROP TABLE plan_confirmations;
--bun:split
ALTER TABLE plan_confirmations_new RENAME TO plan_confirmations;
--bun:split
CREATE INDEX plan_confirmations_expires_idx ON plan_confirmations (expires_at);
--bun:split
ALTER TABLE events ADD COLUMN project TEXT NOT NULL DEFAULT 'main';
--bun:split
CREATE INDEX events_project_idx ON events (project, id);
