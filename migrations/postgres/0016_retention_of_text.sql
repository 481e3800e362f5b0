-- Retention also removes the batched feed and context decisions by age, in the same
-- transaction as the event log: these keep those deletes to the old rows.
CREATE INDEX feed_items_gathered ON feed_items (gathered_at);
CREATE INDEX feed_segments_packed ON feed_segments (packed_at);
CREATE INDEX thread_context_decisions_created ON thread_context_decisions (created_at);
