-- The worker processes each chat's events in arrival order and different chats side by
-- side: every inbox row names its chat (the message's chat, a recall's chat; '' when the
-- event has none), and a claim finds the chats with due work by this index.
ALTER TABLE inbox_events ADD COLUMN chat_key TEXT NOT NULL DEFAULT '';
CREATE INDEX inbox_events_lane ON inbox_events (status, chat_key, id);
