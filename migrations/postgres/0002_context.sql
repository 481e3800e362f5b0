-- The thread event log, its items, routing verdicts, sessions and outbound replies.
-- Times are Unix milliseconds.

CREATE TABLE thread_context_events (
    id            BIGSERIAL PRIMARY KEY,
    source        TEXT    NOT NULL DEFAULT 'feishu',
    chat_id       TEXT    NOT NULL,
    chat_type     TEXT    NOT NULL,
    root_msg_id   TEXT    NOT NULL,
    thread_id     TEXT,
    message_id    TEXT    NOT NULL,
    event_type    TEXT    NOT NULL
        CHECK (event_type IN ('topic_root', 'human_message', 'user_request', 'agent_output', 'command')),
    actor_type    TEXT    NOT NULL,
    actor_id      TEXT    NOT NULL,
    bridge_id     TEXT    NOT NULL,
    bot_profile   TEXT    NOT NULL,
    target_id     TEXT,
    target_name   TEXT,
    session_name  TEXT,
    history_scope TEXT    NOT NULL,
    text          TEXT    NOT NULL,
    metadata_json TEXT    NOT NULL DEFAULT '{}',
    recalled      BOOLEAN NOT NULL DEFAULT FALSE,
    created_at    BIGINT  NOT NULL
);
CREATE UNIQUE INDEX thread_context_events_dedup
    ON thread_context_events (bot_profile, message_id, event_type);
CREATE INDEX thread_context_events_root ON thread_context_events (chat_id, root_msg_id, id);
CREATE INDEX thread_context_events_scope ON thread_context_events (bot_profile, history_scope, id);
CREATE INDEX thread_context_events_message ON thread_context_events (message_id);
CREATE INDEX thread_context_events_created ON thread_context_events (created_at);

CREATE TABLE thread_context_items (
    id             BIGSERIAL PRIMARY KEY,
    event_id       BIGINT  NOT NULL REFERENCES thread_context_events (id) ON DELETE CASCADE,
    item_type      TEXT    NOT NULL,
    role           TEXT    NOT NULL,
    author_label   TEXT    NOT NULL,
    text           TEXT    NOT NULL,
    token_estimate BIGINT  NOT NULL,
    truncated      BOOLEAN NOT NULL DEFAULT FALSE,
    created_at     BIGINT  NOT NULL
);
CREATE INDEX thread_context_items_event ON thread_context_items (event_id);

-- Message ids that were recalled: later deliveries and every context skip them.
CREATE TABLE recalled_messages (
    message_id  TEXT PRIMARY KEY,
    chat_id     TEXT    NOT NULL,
    recalled_at BIGINT  NOT NULL
);

-- Why each message did or did not reach the agent, per profile. The first verdict stands.
CREATE TABLE routing_verdicts (
    id          BIGSERIAL PRIMARY KEY,
    profile     TEXT    NOT NULL,
    message_id  TEXT    NOT NULL,
    chat_id     TEXT    NOT NULL,
    verdict     TEXT    NOT NULL CHECK (verdict IN ('ignored', 'observed', 'invoked')),
    reason      TEXT    NOT NULL,
    session_key TEXT,
    decision_id BIGINT,
    created_at  BIGINT  NOT NULL
);
CREATE UNIQUE INDEX routing_verdicts_message ON routing_verdicts (profile, message_id);
CREATE INDEX routing_verdicts_by_message ON routing_verdicts (message_id);

CREATE TABLE sessions (
    profile                      TEXT    NOT NULL,
    session_key                  TEXT    NOT NULL,
    session_id                   TEXT    NOT NULL,
    chat_id                      TEXT    NOT NULL,
    chat_type                    TEXT    NOT NULL,
    user_id                      TEXT,
    root_msg_id                  TEXT,
    history_scope                TEXT    NOT NULL,
    topic_root_prompt_delivered  BOOLEAN NOT NULL DEFAULT FALSE,
    created_at                   BIGINT  NOT NULL,
    updated_at                   BIGINT  NOT NULL,
    PRIMARY KEY (profile, session_key)
);
CREATE INDEX sessions_chat ON sessions (profile, chat_id);

-- Pending history is everything observed in a scope after this event id.
CREATE TABLE history_watermarks (
    profile       TEXT    NOT NULL,
    history_scope TEXT    NOT NULL,
    last_event_id BIGINT  NOT NULL,
    updated_at    BIGINT  NOT NULL,
    PRIMARY KEY (profile, history_scope)
);

-- Display names learned from mentions (open_id is per app, hence per profile).
CREATE TABLE user_names (
    profile    TEXT    NOT NULL,
    open_id    TEXT    NOT NULL,
    name       TEXT    NOT NULL,
    updated_at BIGINT  NOT NULL,
    PRIMARY KEY (profile, open_id)
);

-- Replies the bridge sent (or, in dry-run and before the Open API client, would send).
CREATE TABLE outbound_messages (
    id         BIGSERIAL PRIMARY KEY,
    profile    TEXT    NOT NULL,
    chat_id    TEXT    NOT NULL,
    reply_to   TEXT,
    kind       TEXT    NOT NULL,
    text       TEXT    NOT NULL,
    created_at BIGINT  NOT NULL
);
CREATE INDEX outbound_messages_profile ON outbound_messages (profile, id);
