-- State that several hoist servers on one database must share: which held
-- plans a user confirmed, consecutive passed probes per job and probe,
-- webhook deliveries already processed, login sessions and the latest plan
-- of each pull request. Rows with an expires_at are deleted once it passed.
CREATE TABLE plan_confirmations (
  revision TEXT PRIMARY KEY,
  created_at TIMESTAMP NOT NULL,
  expires_at TIMESTAMP NOT NULL
);
--bun:split
CREATE INDEX plan_confirmations_expires_idx ON plan_confirmations (expires_at);
--bun:split
CREATE TABLE probe_counters (
  job_id TEXT NOT NULL,
  probe INTEGER NOT NULL,
  passes INTEGER NOT NULL DEFAULT 0,
  updated_at TIMESTAMP NOT NULL,
  PRIMARY KEY (job_id, probe)
);
--bun:split
CREATE TABLE webhook_deliveries (
  key TEXT PRIMARY KEY,
  created_at TIMESTAMP NOT NULL,
  expires_at TIMESTAMP NOT NULL
);
--bun:split
CREATE INDEX webhook_deliveries_expires_idx ON webhook_deliveries (expires_at);
--bun:split
CREATE TABLE web_sessions (
  id_hash TEXT PRIMARY KEY,
  principal TEXT NOT NULL,
  role TEXT NOT NULL,
  csrf TEXT NOT NULL,
  created_at TIMESTAMP NOT NULL,
  expires_at TIMESTAMP NOT NULL
);
--bun:split
CREATE INDEX web_sessions_expires_idx ON web_sessions (expires_at);
--bun:split
CREATE TABLE pr_plans (
  provider TEXT NOT NULL,
  number INTEGER NOT NULL,
  head_sha TEXT NOT NULL,
  data TEXT NOT NULL,
  updated_at TIMESTAMP NOT NULL,
  PRIMARY KEY (provider, number)
);
--bun:split
CREATE INDEX pr_plans_updated_idx ON pr_plans (updated_at);
