-- Workflows are runs too.
ALTER TABLE runs DROP CONSTRAINT runs_type_check;
ALTER TABLE runs ADD CONSTRAINT runs_type_check CHECK (type IN ('task', 'service', 'dev-environment', 'workflow'));
