-- What a webhook agent reported during a turn (`POST /agent/{profile}/turns/{turn_id}/events`),
-- one row per (turn, seq). `body` is the validated event as JSON (its `kind` and fields,
-- without `seq`); `body_bytes` its length, summed against the per-turn bound. `stale`
-- marks an event whose seq was lower than the newest one already stored: kept in the
-- log, never displayed. The rows go with their turn.
CREATE TABLE turn_events (
    turn_id     TEXT    NOT NULL REFERENCES turns (turn_id) ON DELETE CASCADE,
    seq         BIGINT  NOT NULL,
    kind        TEXT    NOT NULL,
    body        TEXT    NOT NULL,
    body_bytes  BIGINT  NOT NULL,
    stale       BOOLEAN NOT NULL,
    received_at BIGINT  NOT NULL,
    PRIMARY KEY (turn_id, seq)
);
