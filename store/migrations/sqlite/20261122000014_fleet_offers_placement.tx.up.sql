-- A cloud fleet remembers the offers its instances could not be had from
-- (the offer walk survives a restart) and its placement groups, one per
-- backend and region (placement: cluster), to delete them with the fleet.
ALTER TABLE fleets ADD COLUMN tried_offers TEXT;
--bun:split
ALTER TABLE fleets ADD COLUMN placement_groups TEXT;
