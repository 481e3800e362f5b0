-- Handoffs: a bot's answer handing work to another profile of the hub. One row per
-- handoff asked for (started, refused or cut), keyed by the target's turn id — derived
-- from the handing turn and the target profile — so a completion written again never
-- hands over twice. The thread index counts a thread's handoffs of the last hour.
CREATE TABLE handoffs (
    turn_id         TEXT    NOT NULL PRIMARY KEY,
    chain_id        TEXT    NOT NULL,
    hop             BIGINT  NOT NULL,
    parent_turn_id  TEXT    NOT NULL,
    from_profile    TEXT    NOT NULL,
    to_profile      TEXT    NOT NULL,
    chat_id         TEXT    NOT NULL,
    root_msg_id     TEXT    NOT NULL,
    message_id      TEXT    NOT NULL,
    root_open_id    TEXT    NOT NULL,
    root_name       TEXT,
    path            TEXT    NOT NULL,
    via             TEXT    NOT NULL,
    outcome         TEXT    NOT NULL,
    created_at      BIGINT  NOT NULL
);
CREATE INDEX handoffs_thread ON handoffs (chat_id, root_msg_id, created_at);
CREATE INDEX handoffs_chain ON handoffs (chain_id);

-- A turn of a chain names it and its hop; an answer's structured handoff is stored with
-- the answer, so a restart that delivers the answer still hands over.
ALTER TABLE turns ADD COLUMN chain_id TEXT;
ALTER TABLE turns ADD COLUMN hop BIGINT;
ALTER TABLE turns ADD COLUMN handoff_json TEXT;

-- The verdict of a handoff names its chain.
ALTER TABLE routing_verdicts ADD COLUMN chain_id TEXT;
