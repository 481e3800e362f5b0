-- Retention deletes by age: these keep its deletes to the old rows instead of a scan of
-- the whole table while holding the write lock.
CREATE INDEX routing_verdicts_created ON routing_verdicts (created_at);
CREATE INDEX outbound_messages_created ON outbound_messages (created_at);
CREATE INDEX turns_queued_at ON turns (queued_at);
