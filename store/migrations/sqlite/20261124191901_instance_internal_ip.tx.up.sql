-- The address other instances of the fleet reach an instance at (dstack's
-- internal_ip): the nodes of a multi-node run find each other by it.
ALTER TABLE instances ADD COLUMN internal_ip TEXT NOT NULL DEFAULT '';
