//! Postgres backend: the engine for several replicas sharing one hub.
//!
//! A commit returns after the WAL is flushed (with the server's default
//! `synchronous_commit = on`), so an acknowledged event survives a bridge crash and a
//! database-server power loss. Workers claim with `FOR UPDATE SKIP LOCKED`, so replicas
//! never process the same event twice. A connection sqlx still counts inside a
//! transaction is closed, never reused (see `hygiene`). Connections use TLS as the URL's
//! `sslmode` asks; `pg_tls` checks those settings and words TLS failures.
//!
//! The store's SQL is generic (`sql`); this file opens the pool, words connection
//! failures and holds Postgres's [`Dialect`]: its locks and its inbox statement.

use std::{str::FromStr, time::Duration};

use sqlx::{
    Connection, PgPool, Postgres,
    migrate::Migrator,
    postgres::{PgConnectOptions, PgPoolOptions, PgQueryResult},
};

use super::{
    Backend, NewInboxEvent, StoreError,
    held_claims::HeldClaims,
    sql::{dialect::Dialect, inbox::bind_new_event, store::SqlStore, store::close_on_failure},
    writer_gate::WriteTurn,
};

/// The Postgres store: the generic store on Postgres.
pub type PgStore = SqlStore<Postgres>;

impl SqlStore<Postgres> {
    /// Connects a pool. Connecting and acquiring are bounded by `timeout`. The URL's TLS
    /// settings are checked first (see `pg_tls`).
    pub async fn open(
        url: &str,
        timeout: Duration,
        max_connections: u32,
    ) -> Result<Self, StoreError> {
        let options = PgConnectOptions::from_str(url)?;
        let at = at(&options);
        let options = super::pg_tls::prepare(url, options)
            .map_err(|why| StoreError::Unreachable { at, why })?;
        Self::open_with(options, timeout, max_connections).await
    }

    /// Connects a pool from explicit options (tests use this for per-test schemas).
    pub async fn open_with(
        options: PgConnectOptions,
        timeout: Duration,
        max_connections: u32,
    ) -> Result<Self, StoreError> {
        let connect = PgPoolOptions::new()
            .max_connections(max_connections)
            .acquire_timeout(timeout)
            .after_release(super::hygiene::after_release)
            .connect_with(options.clone());
        let pool = match tokio::time::timeout(timeout, connect).await {
            Ok(Ok(pool)) => pool,
            Ok(Err(sqlx::Error::PoolTimedOut)) | Err(_) => {
                return Err(why_not(&options, timeout).await);
            }
            Ok(Err(e)) => return Err(unreachable(&options, &e).unwrap_or(e.into())),
        };
        Ok(Self {
            pool,
            timeout,
            state: (),
        })
    }
}

/// Why a pool could not connect within `timeout`: one direct attempt tells refused,
/// unknown host, bad credentials or no such database apart from a slow server.
async fn why_not(options: &PgConnectOptions, timeout: std::time::Duration) -> StoreError {
    use sqlx::Connection as _;
    match tokio::time::timeout(timeout, sqlx::PgConnection::connect_with(options)).await {
        Ok(Err(e)) => unreachable(options, &e).unwrap_or(StoreError::Timeout(timeout)),
        Ok(Ok(_)) | Err(_) => StoreError::Unreachable {
            at: at(options),
            why: format!("did not answer within {timeout:?}"),
        },
    }
}

/// A connection failure in words, when it is one.
fn unreachable(options: &PgConnectOptions, e: &sqlx::Error) -> Option<StoreError> {
    let why = super::pg_tls::failure(options, e).or_else(|| not_tls(e))?;
    Some(StoreError::Unreachable {
        at: at(options),
        why,
    })
}

/// A connection failure that TLS had no part in, in words, when it is one.
fn not_tls(e: &sqlx::Error) -> Option<String> {
    Some(match e {
        sqlx::Error::Io(io) if io.kind() == std::io::ErrorKind::ConnectionRefused => {
            "refused the connection: is Postgres running and listening there?".to_string()
        }
        sqlx::Error::Io(io) => format!("could not be reached: {io}"),
        // Authentication and unknown databases come back as the server's own words,
        // which never quote the password.
        sqlx::Error::Database(d) => format!("refused the login: {}", d.message()),
        _ => return None,
    })
}

fn at(options: &PgConnectOptions) -> String {
    format!("{}:{}", options.get_host(), options.get_port())
}

impl Dialect for Postgres {
    const BACKEND: Backend = Backend::Postgres;
    const MIGRATOR: Migrator = sqlx::migrate!("migrations/postgres");
    const NUMBERED: bool = true;
    /// A plain `BEGIN`; the commit that follows is what makes a batch durable.
    const BEGIN_WRITE: &'static str = "BEGIN";
    /// Concurrent claimers (other workers, other replicas) skip each other's rows.
    const CLAIM_LOCK: &'static str = "FOR UPDATE SKIP LOCKED";
    /// Claims of every replica take turns (a transaction-scoped advisory lock), so two
    /// never both find a chat free and split its events between them. A claim reads a
    /// chat's oldest pending rows in the lane index's order and stops at its limit; a
    /// bitmap scan, which the planner takes when its statistics are older than a burst
    /// of arrivals (autovacuum analyzes a table a minute at the soonest), reads every
    /// pending row of the chat and sorts them instead: a 50,000 backlog made each claim
    /// read over a thousand rows to take 32. The claim's transaction plans without it.
    const CLAIM_SERIALIZE: &'static [&'static str] = &[
        "SET LOCAL enable_bitmapscan TO off",
        "SELECT pg_advisory_xact_lock(7301004116)",
    ];
    /// Recordings of Open API calls take turns across replicas (their own advisory
    /// lock), and need no flush to disk: a record lost in a crash of the database only
    /// leaves a window looking emptier for its minute.
    const CALLS_SERIALIZE: &'static [&'static str] = &[
        "SET LOCAL synchronous_commit TO OFF",
        "SELECT pg_advisory_xact_lock(7301004117)",
    ];

    type State = ();

    fn writes<'a>(pool: &'a PgPool, (): &'a ()) -> &'a PgPool {
        pool
    }

    fn rows_affected(done: &PgQueryResult) -> u64 {
        done.rows_affected()
    }

    /// Replicas share the database: every claim is written, with its owner and lease.
    fn held_claims(_: &()) -> Option<&HeldClaims> {
        None
    }

    /// Postgres takes concurrent writers: no turn to wait for.
    async fn write_turn(_: &()) -> Option<WriteTurn<'_>> {
        None
    }

    /// Writes a group commit: one autocommit statement on a connection of its own
    /// outside any transaction (Postgres never ends a transaction block by itself, so
    /// sqlx's count is exact), so its success means it committed.
    async fn write_inbox(
        pool: &PgPool,
        _: &(),
        q: &str,
        events: &[&NewInboxEvent],
    ) -> Result<Vec<(String, String)>, StoreError> {
        let mut conn = pool.acquire().await?;
        let result = insert_inbox(&mut conn, q, events).await;
        close_on_failure(conn, result)
    }
}

/// The group commit's statement on `conn`, refused when `conn` is inside a transaction.
async fn insert_inbox(
    conn: &mut sqlx::PgConnection,
    q: &str,
    events: &[&NewInboxEvent],
) -> Result<Vec<(String, String)>, StoreError> {
    if conn.is_in_transaction() {
        return Err(StoreError::NotCommitted);
    }
    // One of a few texts (see `sql::inbox::padded`): prepared once per connection.
    let mut query = sqlx::query_as::<_, (String, String)>(q);
    for e in events {
        query = bind_new_event(query, e);
    }
    Ok(query.fetch_all(&mut *conn).await?)
}
