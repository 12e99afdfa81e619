DROP TABLE job_logs;
--bun:split
CREATE TABLE job_log_chunks (
  job_id TEXT NOT NULL,
  first_seq BIGINT NOT NULL,
  last_seq BIGINT NOT NULL,
  lines INTEGER NOT NULL,
  bytes BIGINT NOT NULL,
  first_time TIMESTAMP NOT NULL,
  last_time TIMESTAMP NOT NULL,
  data BLOB NOT NULL,
  PRIMARY KEY (job_id, first_seq)
);
--bun:split
CREATE INDEX job_log_chunks_last_seq_idx ON job_log_chunks (job_id, last_seq);
--bun:split
ALTER TABLE job_log_state ADD COLUMN quota_exceeded BOOLEAN NOT NULL DEFAULT FALSE;
