-- The chat's own feed: un-mentioned talk of a chat whose history scope has no single
-- session (threads isolated, or one session per user) is gathered under `chat:<chat_id>`
-- and each session of the chat reads its segments once, when it is invoked. One row per
-- segment and session that read it (`read`), or that a /new or /reset passed by
-- (`cleared`); a session is given only segments newer than its newest row here.
CREATE TABLE feed_reads (
    segment_id  INTEGER NOT NULL REFERENCES feed_segments (id) ON DELETE CASCADE,
    profile     TEXT    NOT NULL,
    session_key TEXT    NOT NULL,
    feed_key    TEXT    NOT NULL,
    session_id  TEXT,
    turn_id     TEXT,
    state       TEXT    NOT NULL CHECK (state IN ('read', 'cleared')),
    at          INTEGER NOT NULL,
    PRIMARY KEY (segment_id, session_key)
);
CREATE INDEX feed_reads_session ON feed_reads (profile, session_key, feed_key, segment_id);
CREATE INDEX feed_reads_turn ON feed_reads (turn_id);
