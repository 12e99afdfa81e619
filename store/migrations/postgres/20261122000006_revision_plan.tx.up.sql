-- The plan each applied revision produced, as JSON (NULL for revisions
-- that were rejected or seen before this column existed).
ALTER TABLE revisions ADD COLUMN plan TEXT;
