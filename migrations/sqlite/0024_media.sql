-- Files and images an agent sent into its turn's chat or thread
-- (`POST /agent/{profile}/turns/{turn_id}/attachments`), one row per (turn, key): the
-- key is the client's `Idempotency-Key`, or derived from the bytes, name and kind, so a
-- retried request finds its row and sends nothing twice. No bytes are stored: the row
-- names the attachment, its size, the `image_key` / `file_key` Feishu gave the upload,
-- and the message it was sent as (`message_id`, set once sent; NULL while sending).
-- The rows go with their turn.
CREATE TABLE turn_attachments (
    turn_id      TEXT   NOT NULL REFERENCES turns (turn_id) ON DELETE CASCADE,
    idem_key     TEXT   NOT NULL,
    profile      TEXT   NOT NULL,
    name         TEXT   NOT NULL,
    kind         TEXT   NOT NULL,
    size_bytes   BIGINT NOT NULL,
    resource_key TEXT,
    message_id   TEXT,
    created_at   BIGINT NOT NULL,
    sent_at      BIGINT,
    PRIMARY KEY (turn_id, idem_key)
);
