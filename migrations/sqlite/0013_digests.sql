-- The daily digest. `digest_runs` holds one row per local date, written before the run
-- does anything else: a date that has a row never runs again, crashed or not.
-- `digests` holds each session's digest of that run: `written` (stored; its session is
-- reset next), `reset`, `kept` (its session untouched, `reason` says why) or
-- `reset_failed`. `digest_marks` remembers, per session, the last event-log record a
-- digest covered when it reset the session: the next digest starts after it, so a kept
-- day is summarized with the next one.
CREATE TABLE digest_runs (
    date        TEXT    PRIMARY KEY,
    started_by  TEXT    NOT NULL CHECK (started_by IN ('schedule', 'manual')),
    timezone    TEXT    NOT NULL,
    started_at  INTEGER NOT NULL,
    finished_at INTEGER,
    sessions    INTEGER NOT NULL DEFAULT 0,
    reset       INTEGER NOT NULL DEFAULT 0,
    kept        INTEGER NOT NULL DEFAULT 0,
    failed      INTEGER NOT NULL DEFAULT 0,
    file        TEXT
);
CREATE INDEX digest_runs_started ON digest_runs (started_at);

CREATE TABLE digests (
    id             INTEGER PRIMARY KEY AUTOINCREMENT,
    date           TEXT    NOT NULL REFERENCES digest_runs (date),
    profile        TEXT    NOT NULL,
    session_key    TEXT    NOT NULL,
    session_id     TEXT    NOT NULL,
    chat_id        TEXT    NOT NULL,
    chars          INTEGER NOT NULL,
    messages       INTEGER NOT NULL,
    last_event_id  INTEGER NOT NULL,
    summary        TEXT,
    status         TEXT    NOT NULL
        CHECK (status IN ('written', 'reset', 'kept', 'reset_failed')),
    reason         TEXT    NOT NULL,
    detail         TEXT,
    new_session_id TEXT,
    created_at     INTEGER NOT NULL,
    updated_at     INTEGER NOT NULL,
    UNIQUE (date, profile, session_key)
);

CREATE TABLE digest_marks (
    profile       TEXT    NOT NULL,
    session_key   TEXT    NOT NULL,
    last_event_id INTEGER NOT NULL,
    updated_at    INTEGER NOT NULL,
    PRIMARY KEY (profile, session_key)
);
