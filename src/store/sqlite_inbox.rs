//! The SQLite inbox's own connection, on which every group commit is confirmed.
//!
//! Only the committer writes on it, one autocommit `INSERT` at a time, and nothing ever
//! begins a transaction on it, so no transaction state can linger there. A commit hook
//! counts the transactions SQLite commits on this connection: a batch is answered as
//! stored only when its statement succeeded *and* SQLite committed exactly once while it
//! ran. Anything else — an error, a statement abandoned by a timeout, a count that does
//! not add up — closes the connection, and the next batch opens a fresh one.

use std::sync::{
    Arc,
    atomic::{AtomicU64, Ordering},
};

use sqlx::{Connection, SqliteConnection, sqlite::SqliteConnectOptions};
use tokio::sync::Mutex;

use super::{NewInboxEvent, StoreError};

/// The connection, opened on first use and after any doubt.
#[derive(Debug, Default)]
pub(crate) struct InboxWriter {
    slot: Mutex<Option<Writer>>,
}

#[derive(Debug)]
struct Writer {
    conn: SqliteConnection,
    /// Transactions SQLite committed on `conn` (its commit hook counts them).
    commits: Arc<AtomicU64>,
    /// Cleared while a statement runs: still clear at the next use means the last one
    /// was abandoned midway (a timeout), and its outcome is unknown.
    settled: bool,
}

impl InboxWriter {
    /// Inserts `events` with the multi-row statement `q` (see `sql::inbox::insert_inbox`)
    /// and returns the `(profile, event_id)` of the rows that went in, once SQLite has
    /// committed them.
    pub(crate) async fn insert(
        &self,
        options: &SqliteConnectOptions,
        q: &str,
        events: &[&NewInboxEvent],
    ) -> Result<Vec<(String, String)>, StoreError> {
        let mut slot = self.slot.lock().await;
        if slot.as_ref().is_some_and(|w| !w.settled) {
            *slot = None;
        }
        let writer = match slot.as_mut() {
            Some(writer) => writer,
            None => slot.insert(Writer::open(options).await?),
        };
        writer.settled = false;
        let before = writer.commits.load(Ordering::Acquire);
        // One of a few texts (see `sql::inbox::padded`): prepared once, and kept.
        let mut query = sqlx::query_as::<_, (String, String)>(q);
        for e in events {
            query = super::sql::inbox::bind_new_event(query, e);
        }
        let result = query.fetch_all(&mut writer.conn).await;
        let committed = writer.commits.load(Ordering::Acquire) - before;
        writer.settled = true;
        match result {
            // An INSERT writes (and so commits) even when every row was a duplicate.
            Ok(rows) if committed == 1 => Ok(rows),
            Ok(_) => {
                *slot = None;
                Err(StoreError::NotCommitted)
            }
            Err(e) => {
                *slot = None;
                Err(e.into())
            }
        }
    }
}

impl Writer {
    async fn open(options: &SqliteConnectOptions) -> Result<Self, StoreError> {
        let mut conn = SqliteConnection::connect_with(options).await?;
        let commits = Arc::new(AtomicU64::new(0));
        let counter = commits.clone();
        conn.lock_handle().await?.set_commit_hook(move || {
            counter.fetch_add(1, Ordering::AcqRel);
            true
        });
        Ok(Self {
            conn,
            commits,
            settled: true,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{
        InboxStatus,
        sql::{dialect::Dialect, inbox as inbox_sql},
    };

    fn event(id: &str) -> NewInboxEvent {
        NewInboxEvent {
            profile: "p".into(),
            event_id: id.into(),
            event_type: "t".into(),
            message_id: None,
            chat_key: String::new(),
            payload: "{}".into(),
            received_at: crate::util::UnixMs(0),
            status: InboxStatus::Pending,
        }
    }

    #[tokio::test]
    async fn a_write_that_sqlite_did_not_commit_is_refused_and_the_connection_replaced() {
        let dir = tempfile::tempdir().expect("dir");
        let url = format!("sqlite://{}", dir.path().join("t.db").display());
        let store = crate::store::SqliteStore::open(&url, std::time::Duration::from_secs(5))
            .await
            .expect("store");
        crate::store::Database::migrate(&store)
            .await
            .expect("migrate");
        let options = crate::store::SqliteStore::options(&url).expect("options");
        let writer = InboxWriter::default();
        let q = inbox_sql::insert_inbox(1, sqlx::Sqlite::NUMBERED);
        let rows = writer.insert(&options, &q, &[&event("a")]).await;
        assert_eq!(rows.expect("stored").len(), 1);

        // A transaction left open on the connection (what a lost rollback leaves):
        // the next insert runs inside it, SQLite commits nothing, and that is noticed.
        {
            let mut slot = writer.slot.lock().await;
            let w = slot.as_mut().expect("open");
            sqlx::query("BEGIN")
                .execute(&mut w.conn)
                .await
                .expect("begin");
        }
        let swallowed = writer.insert(&options, &q, &[&event("b")]).await;
        assert!(
            matches!(swallowed, Err(StoreError::NotCommitted)),
            "{swallowed:?}"
        );
        assert!(
            writer.slot.lock().await.is_none(),
            "the connection was dropped"
        );

        // A fresh connection takes the retry, and it is committed.
        let rows = writer.insert(&options, &q, &[&event("b")]).await;
        assert_eq!(rows.expect("stored").len(), 1);
        let mut other = SqliteConnection::connect(&url).await.expect("connect");
        let n: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM inbox_events")
            .fetch_one(&mut other)
            .await
            .expect("count");
        assert_eq!(n, 2);
    }
}
