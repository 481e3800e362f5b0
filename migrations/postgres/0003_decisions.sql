-- One row per context selection: what a turn's agent saw, what it did not, and why.
CREATE TABLE thread_context_decisions (
    id                     BIGSERIAL PRIMARY KEY,
    chat_id                TEXT    NOT NULL,
    root_msg_id            TEXT    NOT NULL,
    message_id             TEXT    NOT NULL,
    bridge_id              TEXT    NOT NULL,
    bot_profile            TEXT    NOT NULL,
    target_id              TEXT,
    workspace_mode         TEXT    NOT NULL,
    mode                   TEXT    NOT NULL,
    session_key            TEXT    NOT NULL,
    session_id             TEXT    NOT NULL,
    request_text           TEXT    NOT NULL,
    thread_context         TEXT    NOT NULL,
    selected_item_ids_json TEXT    NOT NULL,
    selected_json          TEXT    NOT NULL,
    excluded_json          TEXT    NOT NULL,
    prompt_preview         TEXT    NOT NULL,
    diagnostics_json       TEXT    NOT NULL,
    -- ',om_a,om_b,': every message whose text this decision holds (for recalls).
    source_message_ids     TEXT    NOT NULL,
    created_at             BIGINT  NOT NULL
);
CREATE INDEX thread_context_decisions_root
    ON thread_context_decisions (bot_profile, root_msg_id, id);
CREATE INDEX thread_context_decisions_message
    ON thread_context_decisions (bot_profile, message_id, id);
