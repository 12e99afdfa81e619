-- The warnings of each valid revision (fields that have no effect in
-- hoist), as JSON (NULL when there are none or the revision was seen before
-- this column existed).
ALTER TABLE revisions ADD COLUMN warnings TEXT;
