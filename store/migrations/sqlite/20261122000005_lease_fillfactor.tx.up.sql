-- Postgres only: fillfactor leaves room in each page so that lease updates
-- (claim, heartbeat) are HOT updates. SQLite has nothing to change.
SELECT 1;
