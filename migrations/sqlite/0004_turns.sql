-- One row per turn: a request handed (or to be handed) to the profile's agent.
-- queued → running → succeeded | failed | cancelled. `output` is stored as soon as the
-- agent answers, before the reply is sent, so a restart delivers it instead of losing it.
CREATE TABLE turns (
    id               INTEGER PRIMARY KEY AUTOINCREMENT,
    turn_id          TEXT    NOT NULL UNIQUE,
    profile          TEXT    NOT NULL,
    session_key      TEXT    NOT NULL,
    session_id       TEXT,
    chat_id          TEXT    NOT NULL,
    message_id       TEXT    NOT NULL,
    request_text     TEXT    NOT NULL,
    job_json         TEXT    NOT NULL,
    state            TEXT    NOT NULL
        CHECK (state IN ('queued', 'running', 'succeeded', 'failed', 'cancelled')),
    decision_id      INTEGER,
    output           TEXT,
    reply_message_id TEXT,
    -- The card a streaming answer is shown in, once posted.
    card_message_id  TEXT,
    error            TEXT,
    queued_at        INTEGER NOT NULL,
    started_at       INTEGER,
    answered_at      INTEGER,
    finished_at      INTEGER
);
CREATE INDEX turns_unfinished ON turns (state, id);
CREATE INDEX turns_session ON turns (profile, session_key, id);
CREATE INDEX turns_message ON turns (message_id);
CREATE INDEX turns_decision ON turns (decision_id);
