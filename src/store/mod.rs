//! Persistence: one [`Store`] trait, a SQLite and a Postgres implementation.
//!
//! The store takes and returns the row types below, never Feishu JSON (the inbox payload
//! is opaque text to it). Both backends run their own embedded migrations
//! (`migrations/sqlite`, `migrations/postgres`), whose version numbers move in lockstep.
//! Every operation is bounded by the configured timeout, so a database that stops
//! answering surfaces as [`StoreError::Timeout`] instead of a hung request.

mod context;
pub(crate) mod context_sql;
pub(crate) mod decision_sql;
pub(crate) mod inbox_sql;
mod postgres;
mod sqlite;
pub(crate) mod turn_sql;
mod turns;

use std::{sync::Arc, time::Duration};

use async_trait::async_trait;
pub use context::{
    CandidateRow, ContextEventRow, ContextStore, DecisionRow, DecisionStore, NewContextEvent,
    NewDecision, NewItem, NewOutbound, NewSession, NewVerdict, OutboundRow, RouteWrite, SessionRow,
    VerdictRow,
};
pub use postgres::PgStore;
use secrecy::ExposeSecret;
pub use sqlite::SqliteStore;
pub use turns::{
    NewTurn, StartedTurn, TurnCompletion, TurnFilter, TurnRow, TurnStart, TurnState, TurnStore,
};

use crate::config::DatabaseConfig;

/// Which database a store talks to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    /// Embedded SQLite file.
    Sqlite,
    /// PostgreSQL server.
    Postgres,
}

impl Backend {
    /// `sqlite` / `postgres`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Sqlite => "sqlite",
            Self::Postgres => "postgres",
        }
    }
}

/// Inbox row status.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InboxStatus {
    /// Waiting for a worker (possibly until `next_attempt_at`).
    Pending,
    /// Claimed by a worker, leased until `lease_until`.
    Processing,
    /// Processed.
    Done,
    /// A well-formed event of a type the bridge does not handle.
    Skipped,
    /// Gave up after `max_attempts`.
    Failed,
}

impl InboxStatus {
    /// Column spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::Processing => "processing",
            Self::Done => "done",
            Self::Skipped => "skipped",
            Self::Failed => "failed",
        }
    }

    /// Parses the column spelling.
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "pending" => Self::Pending,
            "processing" => Self::Processing,
            "done" => Self::Done,
            "skipped" => Self::Skipped,
            "failed" => Self::Failed,
            _ => return None,
        })
    }
}

/// A verified event on its way into the inbox.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewInboxEvent {
    /// Profile name.
    pub profile: String,
    /// Unique per profile.
    pub event_id: String,
    /// Event type.
    pub event_type: String,
    /// For message events: also unique per profile.
    pub message_id: Option<String>,
    /// Decrypted JSON text.
    pub payload: String,
    /// Unix ms.
    pub received_at: i64,
    /// `Pending` or `Skipped`.
    pub status: InboxStatus,
}

/// What happened to one event of a batch insert.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InsertOutcome {
    /// Stored.
    Inserted,
    /// Its event id (or message id) was already stored; nothing was created.
    Duplicate,
}

/// An inbox row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InboxEvent {
    /// Row id (arrival order).
    pub id: i64,
    /// Profile name.
    pub profile: String,
    /// Event id.
    pub event_id: String,
    /// Event type.
    pub event_type: String,
    /// Message id, for message events.
    pub message_id: Option<String>,
    /// Decrypted JSON text.
    pub payload: String,
    /// Unix ms.
    pub received_at: i64,
    /// Status.
    pub status: InboxStatus,
    /// Processing attempts started.
    pub attempts: i64,
    /// Last processing error.
    pub last_error: Option<String>,
    /// Unix ms before which a retry is not due.
    pub next_attempt_at: i64,
}

/// Inbox depth by status.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct InboxCounts {
    /// Waiting (includes scheduled retries).
    pub pending: i64,
    /// Claimed right now.
    pub processing: i64,
    /// Given up.
    pub failed: i64,
    /// Pending rows that have failed at least once.
    pub retrying: i64,
}

/// A failed or retrying event, for `/status`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InboxProblem {
    /// Profile name.
    pub profile: String,
    /// Event id.
    pub event_id: String,
    /// Event type.
    pub event_type: String,
    /// Status (`pending` = will retry, `failed` = gave up).
    pub status: InboxStatus,
    /// Attempts so far.
    pub attempts: i64,
    /// Last error.
    pub last_error: Option<String>,
}

/// How a processing attempt ended, for [`Store::finish_inbox`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Finish {
    /// Processed.
    Done,
    /// Failed; try again at this Unix ms.
    Retry {
        /// Error text (no payload content).
        error: String,
        /// Unix ms.
        at: i64,
    },
    /// Failed for good.
    Failed {
        /// Error text (no payload content).
        error: String,
    },
}

/// A store failure. Callers map it to `store_unavailable`; the source stays for logs.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The database did not answer within the configured bound.
    #[error("database did not answer within {0:?}")]
    Timeout(Duration),
    /// The database answered with an error, or could not be reached.
    #[error("database error")]
    Database(#[from] sqlx::Error),
    /// A migration failed.
    #[error("migration failed")]
    Migrate(#[from] sqlx::migrate::MigrateError),
    /// A row held a value this version cannot read.
    #[error("corrupt row: {0}")]
    Corrupt(String),
}

/// Everything the service persists: both backends implement each part.
pub trait Store: InboxStore + ContextStore + DecisionStore + TurnStore {}

impl<T: InboxStore + ContextStore + DecisionStore + TurnStore> Store for T {}

/// The durable inbox, plus connection-level operations.
#[async_trait]
pub trait InboxStore: Send + Sync + 'static {
    /// Which backend this is.
    fn backend(&self) -> Backend;
    /// Applies pending migrations.
    async fn migrate(&self) -> Result<(), StoreError>;
    /// A cheap round trip, for `/readyz`.
    async fn ping(&self) -> Result<(), StoreError>;
    /// Inserts events in one transaction (group commit). Duplicates of an existing
    /// `(profile, event_id)` or `(profile, message_id)` create nothing.
    async fn insert_inbox_batch(
        &self,
        events: &[NewInboxEvent],
    ) -> Result<Vec<InsertOutcome>, StoreError>;
    /// Claims up to `limit` due events (pending and due, or processing with an expired
    /// lease), in arrival order, leasing them until `now + lease_ms` and counting an
    /// attempt. On Postgres, concurrent claimers never get the same row.
    async fn claim_inbox(
        &self,
        now: i64,
        lease_ms: i64,
        limit: i64,
    ) -> Result<Vec<InboxEvent>, StoreError>;
    /// Records how an attempt ended.
    async fn finish_inbox(&self, id: i64, finish: &Finish, now: i64) -> Result<(), StoreError>;
    /// Returns claimed events to pending without counting the attempt (shutdown).
    async fn release_inbox(&self, ids: &[i64]) -> Result<(), StoreError>;
    /// Inbox depth by status.
    async fn inbox_counts(&self) -> Result<InboxCounts, StoreError>;
    /// The most recent failed or retrying events.
    async fn inbox_problems(&self, limit: i64) -> Result<Vec<InboxProblem>, StoreError>;
    /// One inbox row by its key.
    async fn inbox_event(
        &self,
        profile: &str,
        event_id: &str,
    ) -> Result<Option<InboxEvent>, StoreError>;
}

/// Opens the store named by the database URL (without migrating).
pub async fn open(config: &DatabaseConfig) -> Result<Arc<dyn Store>, StoreError> {
    let timeout = Duration::from_millis(config.timeout_ms);
    let url = config.url.expose_secret();
    if url.starts_with("sqlite:") {
        Ok(Arc::new(SqliteStore::open(url, timeout).await?))
    } else {
        Ok(Arc::new(
            PgStore::open(url, timeout, config.max_connections).await?,
        ))
    }
}

/// Bounds a store operation by `limit`.
pub(crate) async fn bounded<T>(
    limit: Duration,
    fut: impl std::future::Future<Output = Result<T, StoreError>>,
) -> Result<T, StoreError> {
    tokio::time::timeout(limit, fut)
        .await
        .map_err(|_| StoreError::Timeout(limit))?
}

pub(crate) fn parse_status(s: &str) -> Result<InboxStatus, StoreError> {
    InboxStatus::parse(s).ok_or_else(|| StoreError::Corrupt(format!("inbox status {s:?}")))
}

#[cfg(test)]
mod tests {
    #[test]
    fn migration_versions_move_in_lockstep() {
        let versions = |m: sqlx::migrate::Migrator| {
            m.iter()
                .map(|m| (m.version, m.description.to_string()))
                .collect::<Vec<_>>()
        };
        let sqlite = versions(sqlx::migrate!("migrations/sqlite"));
        let postgres = versions(sqlx::migrate!("migrations/postgres"));
        assert!(!sqlite.is_empty());
        assert_eq!(sqlite, postgres);
    }
}
