-- What backend drivers keep about their instances (SSH hosts, pinned host
-- keys, local instances), shared by every server: AES-256-GCM ciphertext of
-- the driver's JSON under the secret key, as SSH records hold private keys.
CREATE TABLE backend_records (
  backend TEXT NOT NULL,
  id TEXT NOT NULL,
  key_id TEXT NOT NULL,
  nonce BLOB NOT NULL,
  ciphertext BLOB NOT NULL,
  updated_at TIMESTAMP NOT NULL,
  PRIMARY KEY (backend, id)
);
--bun:split
-- A run submitted for a revision's spec carries a key naming both, so a
-- retried submission (another server, a crash between writes) is a no-op.
ALTER TABLE runs ADD COLUMN submit_key TEXT;
--bun:split
CREATE UNIQUE INDEX runs_submit_key_idx ON runs (submit_key);
