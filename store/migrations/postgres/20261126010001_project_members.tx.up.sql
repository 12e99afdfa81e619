-- Users' roles in projects, as dstack's project roles (admin, manager,
-- user) plus a read-only viewer. users.role becomes the global role (admin
-- or user): existing users and viewers keep their access to the default
-- project as members of it.
CREATE TABLE project_members (
    project TEXT NOT NULL,
    user_id TEXT NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    role TEXT NOT NULL CHECK (role IN ('admin', 'manager', 'user', 'viewer')),
    created_at TIMESTAMP NOT NULL,
    PRIMARY KEY (project, user_id)
);
--bun:split
CREATE INDEX project_members_user ON project_members (user_id);
--bun:split
INSERT INTO project_members (project, user_id, role, created_at)
SELECT 'main', id, role, created_at FROM users WHERE role IN ('user', 'viewer');
--bun:split
UPDATE users SET role = 'user' WHERE role = 'viewer';
--bun:split
-- A token's name is unique per user (hoist token list shows names).
UPDATE api_tokens SET name = name || '-' || id
WHERE EXISTS (SELECT 1 FROM api_tokens o WHERE o.user_id = api_tokens.user_id AND o.name = api_tokens.name AND o.id < api_tokens.id);
--bun:split
CREATE UNIQUE INDEX api_tokens_user_name ON api_tokens (user_id, name);
