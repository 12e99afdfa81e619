-- A window of each running job's resource samples (CPU, memory, GPUs as
-- JSON), collected from its runner, as dstack keeps job_metrics_points.
CREATE TABLE job_metrics_points (
  job_id TEXT NOT NULL,
  collected_at TIMESTAMPTZ NOT NULL,
  cpu_usage_micros BIGINT NOT NULL,
  memory_usage_bytes BIGINT NOT NULL,
  memory_working_set_bytes BIGINT NOT NULL,
  memory_limit_bytes BIGINT NOT NULL,
  gpus TEXT NOT NULL,
  PRIMARY KEY (job_id, collected_at)
);
