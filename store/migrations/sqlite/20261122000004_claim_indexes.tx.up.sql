CREATE INDEX runs_status_due_idx ON runs (status, last_processed_at, id);
--bun:split
CREATE INDEX jobs_status_due_idx ON jobs (status, last_processed_at, id);
--bun:split
CREATE INDEX instances_status_due_idx ON instances (status, last_processed_at, id);
--bun:split
CREATE INDEX fleets_status_due_idx ON fleets (status, last_processed_at, id);
--bun:split
CREATE INDEX volumes_status_due_idx ON volumes (status, last_processed_at, id);
--bun:split
CREATE INDEX gateways_status_due_idx ON gateways (status, last_processed_at, id);
--bun:split
DROP INDEX runs_status_idx;
--bun:split
DROP INDEX jobs_status_idx;
--bun:split
DROP INDEX instances_status_idx;
