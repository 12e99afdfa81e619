CREATE INDEX events_time_idx ON events (time);
--bun:split
CREATE INDEX offers_cache_expires_idx ON offers_cache (expires_at);
--bun:split
CREATE INDEX instances_status_idx ON instances (status);
