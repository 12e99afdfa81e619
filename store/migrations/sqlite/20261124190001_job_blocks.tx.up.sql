-- The blocks of its instance a job holds: a fleet's `blocks` splits an
-- instance into shares that several jobs take at once (dstack's
-- busy_blocks, summed here over the instance's active jobs).
ALTER TABLE jobs ADD COLUMN blocks INTEGER NOT NULL DEFAULT 1;
