-- A page of runs walks the project's runs newest first and stops at its
-- limit, instead of sorting every run of the project's history.
CREATE INDEX runs_list_idx ON runs (project, submitted_at, id);
--bun:split
-- The cost of active runs (ListOccupancy) reads the unfinished jobs placed
-- on an instance, not every job ever run: its WHERE must stay this
-- index's predicate, term for term, for the planner to use it.
CREATE INDEX jobs_occupancy_idx ON jobs (instance_id, run_id)
    WHERE instance_id <> '' AND status NOT IN ('terminated', 'aborted', 'failed', 'done');
