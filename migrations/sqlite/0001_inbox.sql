-- Durable inbox: every verified Feishu callback, stored before the 200 goes out.
-- Times are Unix milliseconds.
CREATE TABLE inbox_events (
    id              INTEGER PRIMARY KEY AUTOINCREMENT,
    profile         TEXT    NOT NULL,
    event_id        TEXT    NOT NULL,
    event_type      TEXT    NOT NULL,
    message_id      TEXT,
    payload         TEXT    NOT NULL,
    received_at     INTEGER NOT NULL,
    status          TEXT    NOT NULL
        CHECK (status IN ('pending', 'processing', 'done', 'skipped', 'failed')),
    attempts        INTEGER NOT NULL DEFAULT 0,
    last_error      TEXT,
    next_attempt_at INTEGER NOT NULL,
    lease_until     INTEGER,
    processed_at    INTEGER
);

-- Feishu retries a delivery with the same event id ...
CREATE UNIQUE INDEX inbox_events_event_id ON inbox_events (profile, event_id);
-- ... and advises deduplicating message events on the message id.
CREATE UNIQUE INDEX inbox_events_message_id ON inbox_events (profile, message_id)
    WHERE message_id IS NOT NULL;
-- The worker's claim query.
CREATE INDEX inbox_events_due ON inbox_events (status, next_attempt_at);
