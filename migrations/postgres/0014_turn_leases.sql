-- Several replicas on one database: every replica runs turns.
--
-- A turn belongs to the replica that queued it (`lease_owner`). Each replica proves it is
-- alive by renewing its row in `replicas`; the turns of a replica whose heartbeat is older
-- than the lease are taken over by a live one (running ones failed with a notice, or their
-- stored answer delivered; queued ones run). A stop asked anywhere is written to the turn
-- (`cancel_requested_at`), and its owner, which watches for it, cancels the agent call.
ALTER TABLE turns ADD COLUMN lease_owner TEXT;
ALTER TABLE turns ADD COLUMN cancel_requested_at BIGINT;

CREATE TABLE replicas (
    replica_id   TEXT   PRIMARY KEY,
    started_at   BIGINT NOT NULL,
    heartbeat_at BIGINT NOT NULL
);

-- At most one running turn per session, whichever replica runs it. Rows from before this
-- rule that break it (only ever after a crash) are failed first.
UPDATE turns SET state = 'failed', error = 'interrupted: the bridge restarted', finished_at = queued_at
WHERE state = 'running' AND id NOT IN (
    SELECT MAX(id) FROM turns WHERE state = 'running' GROUP BY profile, session_key
);
CREATE UNIQUE INDEX turns_one_running ON turns (profile, session_key) WHERE state = 'running';
CREATE INDEX turns_owner ON turns (lease_owner, state);
