-- The questions webhook agents ask during a turn (`ask` turn events), one row per
-- (turn, ask id), written in the transaction that stores the event. `deadline` is
-- `asked_at` plus the ask's `timeout_secs` (ms); `default_value` is what a timeout
-- answers (NULL: a timeout answers nothing). The first answer wins: `answer`,
-- `answered_by` (the presser's open_id; NULL for a timeout), `answered_at` and
-- `timed_out` are set once. The answer is then POSTed to the agent: a replica claims
-- the delivery (`delivery_owner` until `delivery_until`, ms), and `delivered_at` marks
-- it done. The rows go with their turn.
CREATE TABLE turn_asks (
    turn_id        TEXT    NOT NULL REFERENCES turns (turn_id) ON DELETE CASCADE,
    ask_id         TEXT    NOT NULL,
    seq            BIGINT  NOT NULL,
    profile        TEXT    NOT NULL,
    prompt         TEXT    NOT NULL,
    style          TEXT    NOT NULL,
    options_json   TEXT    NOT NULL,
    default_value  TEXT,
    asked_at       BIGINT  NOT NULL,
    deadline       BIGINT  NOT NULL,
    answer         TEXT,
    answered_by    TEXT,
    answered_at    BIGINT,
    timed_out      BOOLEAN NOT NULL DEFAULT FALSE,
    delivery_owner TEXT,
    delivery_until BIGINT,
    delivered_at   BIGINT,
    PRIMARY KEY (turn_id, ask_id)
);

-- The timeout sweep: open asks by deadline.
CREATE INDEX turn_asks_open ON turn_asks (deadline) WHERE answered_at IS NULL;
-- The delivery sweep: answers not yet delivered.
CREATE INDEX turn_asks_undelivered ON turn_asks (answered_at)
    WHERE answered_at IS NOT NULL AND delivered_at IS NULL;
