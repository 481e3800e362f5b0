-- The inbox's counts (`/status`, `/metrics`) read only this index: how many rows are in
-- each state, retrying (pending with attempts), and the backlog per profile with its
-- oldest arrival. The index it replaces held (status, next_attempt_at), so counting
-- retries and grouping the backlog by profile read every pending row of the table — a
-- whole backlog of payloads per scrape. Claims find due rows through the lane index.
DROP INDEX inbox_events_due;
CREATE INDEX inbox_events_status ON inbox_events (status, profile, received_at, attempts);

-- Each message writes a leaf of every index keyed by its (random) message id. The
-- unique keys of records and verdicts lead with the message id instead, so they also
-- serve the lookups by message id (recall, explain) that an index of their own did:
-- two fewer index writes per message. Uniqueness is the same.
DROP INDEX thread_context_events_message;
DROP INDEX thread_context_events_dedup;
CREATE UNIQUE INDEX thread_context_events_dedup
    ON thread_context_events (message_id, bot_profile, event_type);
DROP INDEX routing_verdicts_by_message;
DROP INDEX routing_verdicts_message;
CREATE UNIQUE INDEX routing_verdicts_message ON routing_verdicts (message_id, profile);
