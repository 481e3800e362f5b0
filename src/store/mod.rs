//! Persistence: surfaces grouped by what they hold — the [`Database`] itself, the
//! [`InboxStore`], [`SessionStore`], [`EventLog`], [`DecisionStore`], [`TurnStore`] (its
//! [`TurnEventStore`] and [`AskStore`], and [`TurnLeases`] across replicas), [`ApiCalls`] (every replica's Open API calls),
//! [`OutboundStore`], the batched [`FeedStore`], the daily [`DigestStore`] and the bots'
//! [`HandoffStore`], and the web view's reads ([`TimelineStore`]) — each
//! implemented once, with the SQL written once, as generic code over the database
//! (`sql`): [`SqliteStore`] and [`PgStore`] are that store on each, and `sqlite.rs` and
//! `postgres.rs` hold what differs. [`Store`] is all of them.
//!
//! The store takes and returns the row types below, never Feishu JSON (the inbox payload
//! is opaque text to it). Both backends run their own embedded migrations
//! (`migrations/sqlite`, `migrations/postgres`), whose version numbers move in lockstep.
//! Every operation is bounded by the configured timeout, so a database that stops
//! answering surfaces as [`StoreError::Timeout`] instead of a hung request.

mod api_calls;
mod asks;
mod database;
mod decisions;
mod digests;
mod event_log;
mod feed;
mod handoffs;
mod held_claims;
mod hygiene;
mod inbox;
mod media;
mod names;
mod outbound;
mod pg_tls;
mod postgres;
mod sessions;
pub(crate) mod sql;
mod sqlite;
mod sqlite_inbox;
mod timeline;
mod turn_events;
mod turn_leases;
mod turns;
mod writer_gate;

use std::{sync::Arc, time::Duration};

/// The records the event log is written from (they live on the ground floor, `vocab`).
pub use crate::vocab::{NewContextEvent, NewItem};
pub use api_calls::{ApiCalls, CallLimits, CallRoom};
pub use asks::{AnswerOutcome, AskRow, AskState, AskStore, ClaimedAnswer, NewAsk};
pub use database::Database;
pub use decisions::{DecisionRow, DecisionStore, NewDecision};
pub use digests::{
    CarriedDigest, DigestPostMark, DigestPostRow, DigestPostStatus, DigestReason, DigestReset,
    DigestRow, DigestRunEnd, DigestRunRow, DigestStatus, DigestStore, DigestTrigger, NewDigest,
    NewDigestRun, OptionalPostStatus, TranscriptQuery,
};
pub use event_log::{
    BatchStep, ContextEventRow, EventLog, NewVerdict, ProcessedBatch, ProfileThread, RouteWrite,
    Routed, VerdictRow,
};
pub use feed::{
    FeedCounts, FeedItemRow, FeedItemState, FeedSegmentRow, FeedStore, NewFeedItem, PackLimits,
    SegmentState, SessionFeed, SharedRead,
};
pub use handoffs::{ChainPlace, ChainTurn, HandoffRow, HandoffStore};
pub use inbox::{
    ClaimLimits, Finish, InboxCounts, InboxDepth, InboxEvent, InboxProblem, InboxStatus,
    InboxStore, InsertOutcome, MAX_ID_BYTES, NewInboxEvent, ProfileBacklog,
};
pub use media::{AttachmentRow, MediaStore, NewAttachment};
pub use names::{CachedName, NameKind, NamesStore};
pub use outbound::{NewOutbound, OutboundRow, OutboundStore, ReplyKind};
pub use postgres::PgStore;
use secrecy::ExposeSecret;
pub use sessions::{NewSession, SessionReset, SessionRow, SessionStore};
/// The claim's look-up of free chats, as the store runs it (for the plan checks of the
/// conformance tests).
#[doc(hidden)]
pub use sql::inbox::lanes as free_chats_query;
pub use sqlite::SqliteStore;
pub use timeline::{DecisionRef, ThreadOf, ThreadSummary, TimelineEvent, TimelineStore};
pub use turn_events::{AppendOutcome, NewTurnEvent, TurnEventLimits, TurnEventRow, TurnEventStore};
pub use turn_leases::{OwnedTurn, ReplicaRow, TurnLeases, alive_since};
pub use turns::{
    HandoffWrite, HistoryQuery, NewTurn, StartedTurn, TurnCompletion, TurnFilter, TurnRow,
    TurnStart, TurnState, TurnStore,
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
    /// The database could not be connected to at all: refused, unknown host, wrong
    /// credentials, no such database, a TLS handshake or certificate it failed, a CA
    /// file that cannot be used. `at` is `host:port`, never the URL's password.
    #[error("the database at {at} {why}")]
    Unreachable { at: String, why: String },
    /// A write was not confirmed committed (its connection's transaction state was in
    /// doubt); the connection was closed and nothing may be assumed stored.
    #[error("the write was not confirmed committed")]
    NotCommitted,
}

impl StoreError {
    /// What went wrong, for logs: the database's code and message, never its detail or
    /// hint (which can quote the values of a row, that is, message text).
    pub fn reason(&self) -> String {
        match self {
            Self::Database(sqlx::Error::Database(e)) => {
                format!("{} ({})", e.message(), e.code().unwrap_or_default())
            }
            Self::Database(e) => e.to_string(),
            Self::Migrate(e) => e.to_string(),
            other => other.to_string(),
        }
    }

    /// Whether the database itself failed (unreachable, timed out, full, read-only, …)
    /// rather than refusing what was asked of it: the same write can succeed once it is
    /// back, so it is worth retrying without limit.
    pub fn database_failed(&self) -> bool {
        // A row holding a value this version cannot read.
        let unreadable = matches!(
            self,
            Self::Database(sqlx::Error::ColumnDecode { .. } | sqlx::Error::Decode(_))
        );
        !self.refuses_row() && !unreadable
    }

    /// Whether the database refused a write because of one row's content (a value it
    /// cannot hold, a constraint, a size limit, a trigger's exception) rather than being
    /// unable to write at all:
    /// a group commit failing this way is retried row by row, so only the bad row is
    /// refused.
    pub fn refuses_row(&self) -> bool {
        let Self::Database(sqlx::Error::Database(e)) = self else {
            return false;
        };
        if !matches!(e.kind(), sqlx::error::ErrorKind::Other) {
            return true;
        }
        if let Some(pg) = e.try_downcast_ref::<sqlx::postgres::PgDatabaseError>() {
            // The SQLSTATE classes of the database's own condition, worth waiting out:
            // 08 connection, 25 transaction state (read-only), 28 authorization, 3D no
            // such database, 40 rollback (serialization, deadlock), 42 schema or
            // privilege, 53 resources (disk full), 55 object state (lock not available),
            // 57 operator intervention (shutdown, cancel), 58 system (I/O), F0
            // configuration, XX internal. Anything else was the statement's: a data
            // exception (22), a constraint (23), a limit (54), a trigger's RAISE (P0) or
            // a code this version does not know — retrying it unchanged would meet it
            // again, so its event's attempts are counted and bounded.
            return !matches!(
                pg.code().get(..2),
                Some(
                    "08" | "25"
                        | "28"
                        | "3D"
                        | "40"
                        | "42"
                        | "53"
                        | "55"
                        | "57"
                        | "58"
                        | "F0"
                        | "XX"
                )
            );
        }
        // SQLite's extended result code; its low byte is the primary code: 18 TOOBIG,
        // 19 CONSTRAINT, 20 MISMATCH, 25 RANGE.
        let primary = e
            .code()
            .and_then(|c| c.parse::<i32>().ok())
            .map(|c| c & 0xff);
        matches!(primary, Some(18 | 19 | 20 | 25))
    }
}

/// Everything the service persists, surface by surface; a caller takes only the
/// surfaces it uses (an `Arc<dyn Store>` coerces to any of them).
pub trait Store:
    Database
    + ApiCalls
    + InboxStore
    + SessionStore
    + EventLog
    + DecisionStore
    + TurnStore
    + TurnEventStore
    + AskStore
    + TurnLeases
    + OutboundStore
    + FeedStore
    + DigestStore
    + NamesStore
    + HandoffStore
    + MediaStore
    + TimelineStore
{
}

impl<T> Store for T where
    T: Database
        + ApiCalls
        + InboxStore
        + SessionStore
        + EventLog
        + DecisionStore
        + TurnStore
        + TurnEventStore
        + AskStore
        + TurnLeases
        + OutboundStore
        + FeedStore
        + DigestStore
        + NamesStore
        + HandoffStore
        + MediaStore
        + TimelineStore
{
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

/// Opens an existing database (without migrating), never creating one: for the commands
/// that only read it. A SQLite file that is not there is an error, not a new empty file.
pub async fn open_existing(config: &DatabaseConfig) -> Result<Arc<dyn Store>, StoreError> {
    let timeout = Duration::from_millis(config.timeout_ms);
    let url = config.url.expose_secret();
    if url.starts_with("sqlite:") {
        let options = SqliteStore::options(url)?.create_if_missing(false);
        Ok(Arc::new(SqliteStore::open_with(options, timeout).await?))
    } else {
        open(config).await
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
