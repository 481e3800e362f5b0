-- Feishu's per-app limits across replicas: every Open API call a replica makes is
-- recorded here first, in a transaction that replicas take in turns, and only when fewer
-- calls of the app were recorded in the second and the minute before than the bridge's
-- limits allow. Rows older than a minute are deleted as calls are recorded. (A SQLite
-- file has one process, which keeps its budget in memory; the table is here so that
-- both backends have the same schema.)
CREATE TABLE api_calls (
    app_id TEXT   NOT NULL,
    at_ms  BIGINT NOT NULL
);
CREATE INDEX api_calls_app_at ON api_calls (app_id, at_ms);
