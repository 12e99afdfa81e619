-- Tables and columns nothing writes: the offers cache (the Market caches in
-- memory), the sources table (the sync state names the source), and the
-- instances' health and job-slot blocks (an instance runs one job at a time).
DROP TABLE offers_cache;
--bun:split
DROP TABLE sources;
--bun:split
ALTER TABLE instances DROP COLUMN health;
--bun:split
ALTER TABLE instances DROP COLUMN total_blocks;
--bun:split
ALTER TABLE instances DROP COLUMN busy_blocks;
