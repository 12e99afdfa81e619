-- Several projects in one server: each has its own Git source, so the
-- revisions it saw (the same sha may be valid in one project's directory and
-- invalid in another's), its sync state, its held plans' confirmations and its
-- events are kept per project. Existing rows belong to project main.
ALTER TABLE revisions ADD COLUMN project TEXT NOT NULL DEFAULT 'main';
--bun:split
ALTER TABLE revisions DROP CONSTRAINT revisions_pkey;
--bun:split
ALTER TABLE revisions ADD PRIMARY KEY (project, sha);
--bun:split
DROP INDEX revisions_seen_at_idx;
--bun:split
CREATE INDEX revisions_seen_at_idx ON revisions (project, seen_at);
--bun:split
ALTER TABLE sync_state ADD COLUMN project TEXT NOT NULL DEFAULT 'main';
--bun:split
ALTER TABLE sync_state DROP CONSTRAINT sync_state_pkey;
--bun:split
ALTER TABLE sync_state DROP CONSTRAINT sync_state_id_check;
--bun:split
ALTER TABLE sync_state DROP COLUMN id;
--bun:split
ALTER TABLE sync_state ADD PRIMARY KEY (project);
--bun:split
ALTER TABLE sync_state ALTER COLUMN project DROP DEFAULT;
--bun:split
ALTER TABLE plan_confirmations ADD COLUMN project TEXT NOT NULL DEFAULT 'main';
--bun:split
ALTER TABLE plan_confirmations DROP CONSTRAINT plan_confirmations_pkey;
--bun:split
ALTER TABLE plan_confirmations ADD PRIMARY KEY (project, revision);
--bun:split
ALTER TABLE events ADD COLUMN project TEXT NOT NULL DEFAULT 'main';
--bun:split
CREATE INDEX events_project_idx ON events (project, id);
