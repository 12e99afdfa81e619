-- The id of the comment (GitHub) or note (GitLab) hoist posted the pull
-- request's plan in, so that a new push edits that comment, whichever
-- server receives the webhook and across restarts; 0 until one is posted.
ALTER TABLE pr_plans ADD COLUMN comment_id BIGINT NOT NULL DEFAULT 0;
