//! Migrations carry earlier data forward: a database written by an earlier version is
//! migrated with its rows intact and in their new shape.

use std::borrow::Cow;

use sqlx::{Connection, migrate::Migrator};

use crate::{
    both_backends,
    support::{Kind, TestDb},
};

/// The backend's migrations up to `version`.
fn migrator(kind: Kind, version: i64) -> Migrator {
    let mut m = match kind {
        Kind::Sqlite => sqlx::migrate!("migrations/sqlite"),
        Kind::Postgres => sqlx::migrate!("migrations/postgres"),
    };
    m.migrations = Cow::Owned(
        m.migrations
            .iter()
            .filter(|m| m.version <= version)
            .cloned()
            .collect(),
    );
    m
}

/// A decision as version 6 stored it: its source messages in one comma-joined column.
const OLD_DECISION: &str = "INSERT INTO thread_context_decisions \
    (chat_id, root_msg_id, message_id, bridge_id, bot_profile, target_id, workspace_mode, mode, \
     session_key, session_id, request_text, thread_context, selected_item_ids_json, selected_json, \
     excluded_json, prompt_preview, diagnostics_json, source_message_ids, created_at) \
    VALUES ('oc', 'om_root', 'om_req', 'cli', 'planner', NULL, 'shared', 'thread_context', \
            'group:oc', 's_1', 'req', '', '[]', '[]', '[]', '', '{}', ',om_req,om_root,om_a,', 1)";

/// Migrates `$conn` to version 6, stores an old decision, migrates the rest, and checks
/// its sources became rows (a macro: the two backends' connections share no trait that
/// both queries and migrations take).
macro_rules! sources_become_rows_on {
    ($conn:expr, $kind:expr) => {{
        let mut c = $conn;
        migrator($kind, 6)
            .run_direct(&mut c)
            .await
            .expect("up to 6");
        sqlx::query(OLD_DECISION)
            .execute(&mut c)
            .await
            .expect("an old decision");
        migrator($kind, i64::MAX)
            .run_direct(&mut c)
            .await
            .expect("the rest");
        let sources: Vec<String> =
            sqlx::query_scalar("SELECT message_id FROM decision_sources ORDER BY message_id")
                .fetch_all(&mut c)
                .await
                .expect("sources");
        assert_eq!(sources, ["om_a", "om_req", "om_root"]);
    }};
}

async fn sources_become_rows(db: TestDb) {
    match db.kind {
        Kind::Sqlite => {
            let c = sqlx::SqliteConnection::connect(&format!("{}?mode=rwc", db.url))
                .await
                .expect("connect");
            sources_become_rows_on!(c, db.kind);
        }
        Kind::Postgres => {
            let c = sqlx::PgConnection::connect(&db.url).await.expect("connect");
            sources_become_rows_on!(c, db.kind);
        }
    }
}
both_backends!(
    decision_sources_recorded_as_a_list_become_rows,
    sources_become_rows
);
