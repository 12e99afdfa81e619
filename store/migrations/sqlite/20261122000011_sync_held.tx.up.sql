-- Whether the latest revision's plan (or some of its steps) waits for a
-- user's confirmation, and why (a JSON list of reasons). Held plans used to
-- be sync errors starting with "held: "; such rows become held, and the
-- next sync (one runs at start) writes their reasons.
ALTER TABLE sync_state ADD COLUMN held BOOLEAN NOT NULL DEFAULT FALSE;
--bun:split
ALTER TABLE sync_state ADD COLUMN held_reasons TEXT;
--bun:split
UPDATE sync_state SET held = TRUE, errors = NULL WHERE errors LIKE '["held: %';
