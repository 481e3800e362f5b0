-- Carrying a digest into its session's next round, and posting it. A reset session's
-- next turn finds its digest by `new_session_id`. `post_status` says where posting a
-- digest stands: NULL (not tried), `posted` (never posted again), `failed` (a later
-- pass retries it, up to a few attempts) or `skipped` (nowhere to post it, e.g. a chat
-- without a workspace owner); `post_detail` says why.
ALTER TABLE digests ADD COLUMN post_status TEXT
    CHECK (post_status IN ('posted', 'failed', 'skipped'));
ALTER TABLE digests ADD COLUMN post_attempts INTEGER NOT NULL DEFAULT 0;
ALTER TABLE digests ADD COLUMN post_message_id TEXT;
ALTER TABLE digests ADD COLUMN post_detail TEXT;
CREATE INDEX digests_new_session ON digests (profile, session_key, new_session_id);
