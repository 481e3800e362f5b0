//! SQLite backend: one file, WAL journal, `synchronous = FULL`.
//!
//! With WAL and `FULL`, a commit returns only after the WAL is fsynced, so an
//! acknowledged event survives a process crash and a power loss. Group commit (the inbox
//! committer batching concurrent requests into one transaction) pays that fsync once per
//! batch instead of once per event. Writers take turns in process, the inbox first (see
//! `writer_gate`). The inbox is written on a connection of its own, on
//! which each batch's commit is confirmed (see `sqlite_inbox`); a pooled connection left
//! inside a transaction is closed, never reused (see `hygiene`).
//!
//! The store's SQL is generic (`sql`); this file opens the pool and holds SQLite's
//! [`Dialect`]: its statements, its writer's turn and its inbox connection.

use std::{str::FromStr, sync::Arc, time::Duration};

use sqlx::{
    Sqlite, SqlitePool,
    migrate::Migrator,
    sqlite::{
        SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteQueryResult,
        SqliteSynchronous,
    },
};

use super::{
    Backend, NewInboxEvent, StoreError,
    held_claims::HeldClaims,
    sql::{dialect::Dialect, store::SqlStore},
    sqlite_inbox::InboxWriter,
    writer_gate::{WriteTurn, WriterGate},
};

/// The SQLite store: the generic store on SQLite.
pub type SqliteStore = SqlStore<Sqlite>;

/// What a SQLite store keeps besides its pool: the options its inbox connection opens
/// with, that connection, the gate its writers take turns at, the one connection every
/// other write goes through, and the inbox claims in hand.
///
/// SQLite drops a connection's page cache whenever another connection wrote since its
/// last transaction. Writes spread over the pool's connections therefore found a cold
/// cache each time and read every page they touched again from the file; on the one
/// writer connection the pages a drain keeps touching stay in its cache. (Writes take
/// turns at the gate anyway, so one connection costs no parallelism.)
#[derive(Debug, Clone)]
pub struct SqliteState {
    options: SqliteConnectOptions,
    writer: SqlitePool,
    inbox: Arc<InboxWriter>,
    gate: Arc<WriterGate>,
    claims: Arc<HeldClaims>,
}

/// Held by the one process serving a SQLite database file (an advisory lock on
/// `<file>.lock` beside it), released when the process ends, however it ends.
#[derive(Debug)]
pub struct ServingLock {
    _file: std::fs::File,
}

/// The writer connection's page cache, in KiB (negative: SQLite's unit for a size).
const WRITER_CACHE: &str = "-16384";

/// Each pooled (reading) connection's page cache, in KiB. SQLite empties a connection's
/// cache whenever another connection wrote, so while the worker writes, a read finds it
/// cold whatever its size; a small one bounds what the readers hold.
const READER_CACHE: &str = "-512";

impl SqlStore<Sqlite> {
    /// Takes the serving lock of the database file named by a `sqlite://` URL; `None`
    /// for an in-memory database. Fails when another process holds it: SQLite is one
    /// process's (several replicas share a Postgres database instead).
    pub fn lock_for_serving(url: &str) -> Result<Option<ServingLock>, String> {
        let options = SqliteConnectOptions::from_str(url).map_err(|e| e.to_string())?;
        let db = options.get_filename();
        if db.as_os_str().is_empty() || db.as_os_str() == ":memory:" {
            return Ok(None);
        }
        let mut name = db.as_os_str().to_owned();
        name.push(".lock");
        let path = std::path::PathBuf::from(name);
        let file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .map_err(|e| format!("cannot open {}: {e}", path.display()))?;
        match file.try_lock() {
            Ok(()) => Ok(Some(ServingLock { _file: file })),
            Err(std::fs::TryLockError::WouldBlock) => Err(format!(
                "another feishu-bridge process is serving the SQLite database {} (it holds {}); \
                 SQLite is for one process: stop the other one, or run several replicas on Postgres",
                db.display(),
                path.display()
            )),
            Err(std::fs::TryLockError::Error(e)) => {
                Err(format!("cannot lock {}: {e}", path.display()))
            }
        }
    }

    /// Opens (creating if needed) the database file named by a `sqlite://` URL.
    pub async fn open(url: &str, timeout: Duration) -> Result<Self, StoreError> {
        Self::open_with(Self::options(url)?, timeout).await
    }

    /// The connection options of [`Self::open`]: WAL, `synchronous = FULL`, foreign
    /// keys, and a lock wait no longer than the operation bound.
    pub fn options(url: &str) -> Result<SqliteConnectOptions, StoreError> {
        Ok(SqliteConnectOptions::from_str(url)?
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Full)
            .foreign_keys(true))
    }

    /// Opens a pool with explicit options (tests add pragmas such as `max_page_count`).
    pub async fn open_with(
        options: SqliteConnectOptions,
        timeout: Duration,
    ) -> Result<Self, StoreError> {
        let options = options.busy_timeout(timeout);
        let pool = SqlitePoolOptions::new()
            .max_connections(4)
            .min_connections(1)
            .acquire_timeout(timeout)
            .after_release(super::hygiene::after_release)
            .connect_with(options.clone().pragma("cache_size", READER_CACHE))
            .await?;
        let writer = SqlitePoolOptions::new()
            .max_connections(1)
            .min_connections(1)
            .max_lifetime(None)
            .idle_timeout(None)
            .acquire_timeout(timeout)
            .after_release(super::hygiene::after_release)
            .connect_with(options.clone().pragma("cache_size", WRITER_CACHE))
            .await?;
        Ok(Self {
            pool,
            timeout,
            state: SqliteState {
                writer,
                options,
                inbox: Arc::default(),
                gate: Arc::default(),
                claims: Arc::default(),
            },
        })
    }
}

impl Dialect for Sqlite {
    const BACKEND: Backend = Backend::Sqlite;
    const MIGRATOR: Migrator = sqlx::migrate!("migrations/sqlite");
    const NUMBERED: bool = false;
    /// Takes the write lock at once: a batch never waits to upgrade a read lock, and a
    /// connection already inside a transaction fails here instead of nesting.
    const BEGIN_WRITE: &'static str = "BEGIN IMMEDIATE";
    /// SQLite serialises writers and one process owns the file, so the claim's
    /// `UPDATE … RETURNING` is atomic without row locks.
    const CLAIM_LOCK: &'static str = "";
    /// Nothing to add: a claim's first write takes SQLite's one write lock.
    const CLAIM_SERIALIZE: &'static [&'static str] = &[];
    /// One process writes the file, one write at a time.
    const CALLS_SERIALIZE: &'static [&'static str] = &[];

    type State = SqliteState;

    fn rows_affected(done: &SqliteQueryResult) -> u64 {
        done.rows_affected()
    }

    fn writes<'a>(_: &'a SqlitePool, state: &'a SqliteState) -> &'a SqlitePool {
        &state.writer
    }

    /// One process serves the file: its claims are held in memory (see `held_claims`).
    fn held_claims(state: &SqliteState) -> Option<&HeldClaims> {
        Some(&state.claims)
    }

    /// Any other write's turn at SQLite's one writer (see `writer_gate`).
    async fn write_turn(state: &SqliteState) -> Option<WriteTurn<'_>> {
        Some(state.gate.other().await)
    }

    /// Writes a group commit on the inbox's own connection (see `sqlite_inbox`), next
    /// at the writer's gate.
    async fn write_inbox(
        _: &SqlitePool,
        state: &SqliteState,
        q: &str,
        events: &[&NewInboxEvent],
    ) -> Result<Vec<(String, String)>, StoreError> {
        let _turn = state.gate.inbox().await;
        state.inbox.insert(&state.options, q, events).await
    }
}

#[cfg(test)]
mod tests {
    use sqlx::{Connection, SqliteConnection};

    /// The bundled SQLite is built with the options `.cargo/config.toml` gives it: a
    /// build without them works, but pays a process-wide mutex on every allocation.
    #[tokio::test]
    async fn the_bundled_sqlite_keeps_no_memory_statistics() -> Result<(), sqlx::Error> {
        let mut conn = SqliteConnection::connect("sqlite::memory:").await?;
        let options: Vec<String> = sqlx::query_scalar("PRAGMA compile_options")
            .fetch_all(&mut conn)
            .await?;
        for wanted in ["DEFAULT_MEMSTATUS=0", "USE_ALLOCA"] {
            assert!(
                options.iter().any(|o| o == wanted),
                "SQLite built without {wanted}: {options:?}"
            );
        }
        Ok(())
    }
}
