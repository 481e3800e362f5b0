-- Threads are read in the order things were said (the message's create time, then its
-- id, then the record's id), not in the order records were written: bots record a
-- thread independently, so an answer can be written before the question it answers.
-- This index serves that order; the one on (chat_id, root_msg_id, id) served the old.
DROP INDEX thread_context_events_root;
CREATE INDEX thread_context_events_said
    ON thread_context_events (chat_id, root_msg_id, created_at, message_id, id);
