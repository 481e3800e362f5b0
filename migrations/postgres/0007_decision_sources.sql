-- Every message whose text a decision holds, one row each, so a recall finds the
-- decisions to scrub through an index instead of a LIKE over a comma-joined list.
CREATE TABLE decision_sources (
    decision_id BIGINT NOT NULL REFERENCES thread_context_decisions (id) ON DELETE CASCADE,
    message_id  TEXT   NOT NULL,
    PRIMARY KEY (decision_id, message_id)
);
CREATE INDEX decision_sources_message ON decision_sources (message_id);

-- The lists recorded so far (',om_a,om_b,'), split into rows.
INSERT INTO decision_sources (decision_id, message_id)
SELECT DISTINCT d.id, s.message_id
FROM thread_context_decisions d,
     LATERAL unnest(string_to_array(d.source_message_ids, ',')) AS s (message_id)
WHERE s.message_id <> ''
ON CONFLICT DO NOTHING;

ALTER TABLE thread_context_decisions DROP COLUMN source_message_ids;
