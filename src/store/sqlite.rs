//! SQLite backend: one file, WAL journal, `synchronous = FULL`.
//!
//! With WAL and `FULL`, a commit returns only after the WAL is fsynced, so an
//! acknowledged event survives a process crash and a power loss. Group commit (the inbox
//! committer batching concurrent requests into one transaction) pays that fsync once per
//! batch instead of once per event.

use std::{str::FromStr, time::Duration};

use sqlx::{
    SqlitePool,
    sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous},
};

use super::{Backend, StoreError};

/// The SQLite store.
#[derive(Debug, Clone)]
pub struct SqliteStore {
    pool: SqlitePool,
    timeout: Duration,
}

impl SqliteStore {
    /// Opens (creating if needed) the database file named by a `sqlite://` URL.
    pub async fn open(url: &str, timeout: Duration) -> Result<Self, StoreError> {
        let options = SqliteConnectOptions::from_str(url)?
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Full)
            .busy_timeout(Duration::from_secs(5))
            .foreign_keys(true);
        let pool = SqlitePoolOptions::new()
            .max_connections(4)
            .min_connections(1)
            .acquire_timeout(timeout)
            .connect_with(options)
            .await?;
        Ok(Self { pool, timeout })
    }
}

/// SQLite serialises writers and one process owns the file, so the claim's
/// `UPDATE … RETURNING` is atomic without row locks.
const CLAIM_LOCK: &str = "";

super::inbox_sql::impl_inbox_store!(
    SqliteStore,
    Backend::Sqlite,
    sqlx::migrate!("migrations/sqlite"),
    CLAIM_LOCK
);

super::context_sql::impl_context_store!(SqliteStore);
super::decision_sql::impl_decision_store!(SqliteStore);
super::turn_sql::impl_turn_store!(SqliteStore);
