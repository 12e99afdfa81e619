-- A gateway runs on an instance of its backend, created by the gateway
-- worker (its id persisted before the backend is asked), and is reached at
-- its admin API with a token kept sealed with the server's secret key; the
-- configuration last put to it is remembered by version and hash; its
-- public listeners' ports make its services' URLs.
ALTER TABLE gateways ADD COLUMN instance_id TEXT NOT NULL DEFAULT '';
--bun:split
ALTER TABLE gateways ADD COLUMN admin_url TEXT NOT NULL DEFAULT '';
--bun:split
ALTER TABLE gateways ADD COLUMN admin_token TEXT NOT NULL DEFAULT '';
--bun:split
ALTER TABLE gateways ADD COLUMN config_version BIGINT NOT NULL DEFAULT 0;
--bun:split
ALTER TABLE gateways ADD COLUMN config_hash TEXT NOT NULL DEFAULT '';
--bun:split
ALTER TABLE gateways ADD COLUMN http_port INTEGER NOT NULL DEFAULT 0;
--bun:split
ALTER TABLE gateways ADD COLUMN https_port INTEGER NOT NULL DEFAULT 0;
