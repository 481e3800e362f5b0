-- Every message whose text a decision holds, one row each, so a recall finds the
-- decisions to scrub through an index instead of a LIKE over a comma-joined list.
CREATE TABLE decision_sources (
    decision_id INTEGER NOT NULL REFERENCES thread_context_decisions (id) ON DELETE CASCADE,
    message_id  TEXT    NOT NULL,
    PRIMARY KEY (decision_id, message_id)
);
CREATE INDEX decision_sources_message ON decision_sources (message_id);

-- The lists recorded so far (',om_a,om_b,'), split into rows.
WITH RECURSIVE split (decision_id, rest, message_id) AS (
    SELECT id, substr(source_message_ids, 2), NULL FROM thread_context_decisions
    UNION ALL
    SELECT decision_id, substr(rest, instr(rest, ',') + 1), substr(rest, 1, instr(rest, ',') - 1)
    FROM split WHERE instr(rest, ',') > 0
)
INSERT OR IGNORE INTO decision_sources (decision_id, message_id)
SELECT decision_id, message_id FROM split WHERE message_id IS NOT NULL AND message_id <> '';

ALTER TABLE thread_context_decisions DROP COLUMN source_message_ids;
