ALTER TABLE runs SET (fillfactor = 70);
--bun:split
ALTER TABLE jobs SET (fillfactor = 70);
--bun:split
ALTER TABLE instances SET (fillfactor = 70);
--bun:split
ALTER TABLE fleets SET (fillfactor = 70);
--bun:split
ALTER TABLE volumes SET (fillfactor = 70);
--bun:split
ALTER TABLE gateways SET (fillfactor = 70);
