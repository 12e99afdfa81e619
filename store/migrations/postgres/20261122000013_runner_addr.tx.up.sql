-- A job's runner is reached at one address, its Unix socket on the instance
-- (unix://path): runner_host becomes runner_addr and the port goes.
ALTER TABLE jobs RENAME COLUMN runner_host TO runner_addr;
--bun:split
ALTER TABLE jobs DROP COLUMN runner_port;
