-- The batched feed: un-mentioned group messages a profile observes, gathered per session
-- (`feed_items`), packed into segments attached to the session's history without waking
-- its agent (`feed_segments`). Everything persisted: a restart loses no batch.
--
-- An item is `gathered` until a segment takes it (`packed`), or a newer segment fills
-- up without it (`passed_over`: background, not an archive); `recalled` and `cleared`
-- (by /new or /reset) never reach an agent. A segment `waiting` beyond the session's
-- unread limit is `attached` when there is room, `read` once a turn used it.
CREATE TABLE feed_items (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    profile     TEXT    NOT NULL,
    session_key TEXT    NOT NULL,
    chat_id     TEXT    NOT NULL,
    message_id  TEXT    NOT NULL,
    sender      TEXT    NOT NULL,
    text        TEXT    NOT NULL,
    said_at     INTEGER NOT NULL,
    gathered_at INTEGER NOT NULL,
    state       TEXT    NOT NULL
        CHECK (state IN ('gathered', 'packed', 'passed_over', 'recalled', 'cleared')),
    segment_id  INTEGER,
    UNIQUE (profile, message_id)
);
CREATE INDEX feed_items_session ON feed_items (profile, session_key, state, id);
CREATE INDEX feed_items_segment ON feed_items (segment_id);
CREATE INDEX feed_items_message ON feed_items (message_id);

CREATE TABLE feed_segments (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    profile      TEXT    NOT NULL,
    session_key  TEXT    NOT NULL,
    items        INTEGER NOT NULL,
    chars        INTEGER NOT NULL,
    state        TEXT    NOT NULL CHECK (state IN ('waiting', 'attached', 'read', 'cleared')),
    packed_at    INTEGER NOT NULL,
    session_id   TEXT,
    attached_at  INTEGER,
    read_at      INTEGER,
    read_by_turn TEXT
);
CREATE INDEX feed_segments_session ON feed_segments (profile, session_key, state, id);
CREATE INDEX feed_segments_turn ON feed_segments (read_by_turn);
