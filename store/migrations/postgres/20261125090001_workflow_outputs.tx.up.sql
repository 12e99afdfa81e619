-- What a program provider printed, kept by the hash of everything it read
-- (the workflow, the provider and its inputs): the provider runs again only
-- when that hash changes.
CREATE TABLE workflow_outputs (
    project TEXT NOT NULL,
    input_hash TEXT NOT NULL,
    jobs TEXT NOT NULL,
    PRIMARY KEY (project, input_hash)
);
