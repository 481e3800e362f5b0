-- Display names read through the Open API, per profile (open_ids are app-scoped): the
-- names of users (`kind` 'user', by open_id) and of chats (`kind` 'chat', by chat_id).
-- `name` is NULL when the lookup answered without one (a user out of the app's
-- visibility, say); such a row still says when it was looked up, so it is not asked
-- again before its time to live is over.
CREATE TABLE directory_names (
    profile    TEXT   NOT NULL,
    kind       TEXT   NOT NULL,
    id         TEXT   NOT NULL,
    name       TEXT,
    fetched_at BIGINT NOT NULL,
    PRIMARY KEY (profile, kind, id)
);
