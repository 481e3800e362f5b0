//! Connections whose transaction state is in doubt never go back to the pool.
//!
//! SQLite rolls a whole transaction back by itself on some errors (`SQLITE_FULL`,
//! `SQLITE_IOERR`, …). sqlx's own `ROLLBACK` then fails ("no transaction is active") and
//! sqlx keeps counting the transaction; the next `begin()` on that connection becomes a
//! `SAVEPOINT` that opens a real transaction nobody commits, and every later autocommit
//! statement on it is silently swallowed. So a connection that sqlx still counts inside a
//! transaction when it is released is closed, never reused. That covers every way in: a
//! transaction only stays counted after a `COMMIT` or `ROLLBACK` that failed, or one
//! still queued from a dropped operation (a timeout) — closing that one as well costs a
//! reconnect, never a write. The check reads sqlx's count, so it costs no round trip.
//!
//! The inbox committer does not rely on it alone: each batch begins with its own
//! `BEGIN IMMEDIATE`, which SQLite refuses inside a transaction and which sqlx confirms
//! left SQLite's autocommit mode, so a batch is committed for real or not at all.

use std::{future::Future, pin::Pin};

use sqlx::{Connection, pool::PoolConnectionMetadata};

/// What a pool hook returns.
type Verdict<'c> = Pin<Box<dyn Future<Output = Result<bool, sqlx::Error>> + Send + 'c>>;

/// `after_release` hook of both pools: `Ok(true)` keeps the connection.
pub(crate) fn after_release<C: Connection>(conn: &mut C, _: PoolConnectionMetadata) -> Verdict<'_> {
    let outside = !conn.is_in_transaction();
    if !outside {
        tracing::warn!("a database connection left inside a transaction was closed");
    }
    Box::pin(std::future::ready(Ok(outside)))
}

#[cfg(test)]
mod tests {
    use std::str::FromStr;

    use sqlx::{
        Connection, SqliteConnection,
        sqlite::{SqliteConnectOptions, SqlitePoolOptions},
    };

    use super::after_release;

    /// A one-connection pool whose connections may grow the file to `pages` pages.
    async fn pool(url: &str, pages: &str, hook: bool) -> sqlx::SqlitePool {
        let options = SqliteConnectOptions::from_str(url)
            .expect("url")
            .create_if_missing(true)
            .journal_mode(sqlx::sqlite::SqliteJournalMode::Wal)
            .pragma("max_page_count", pages.to_string());
        let mut pool = SqlitePoolOptions::new().max_connections(1);
        if hook {
            pool = pool.after_release(after_release);
        }
        pool.connect_with(options).await.expect("pool")
    }

    /// Fills the file inside a transaction until SQLite refuses with SQLITE_FULL (and
    /// rolls the transaction back by itself), then lets sqlx try its own rollback.
    async fn fill_in_a_transaction(pool: &sqlx::SqlitePool) {
        let mut tx = pool.begin().await.expect("begin");
        let page = "x".repeat(4000);
        let mut refused = None;
        for _ in 0..1000 {
            if let Err(e) = sqlx::query("INSERT INTO t (x) VALUES ($1)")
                .bind(&page)
                .execute(&mut *tx)
                .await
            {
                refused = Some(e);
                break;
            }
        }
        let refused = refused.expect("the file filled up");
        assert!(refused.to_string().contains("full"), "{refused}");
        drop(tx);
    }

    /// What a later caller of the pool sees: a write it made outside any transaction is
    /// visible to another connection.
    async fn later_writes_are_committed(url: &str, pool: &sqlx::SqlitePool) -> bool {
        sqlx::query("PRAGMA max_page_count = 1000000")
            .execute(pool)
            .await
            .expect("room again");
        let mut tx = pool.begin().await.expect("begin");
        sqlx::query("INSERT INTO t (x) VALUES ('rolled back')")
            .execute(&mut *tx)
            .await
            .expect("insert");
        tx.rollback().await.expect("rollback");
        sqlx::query("INSERT INTO t (x) VALUES ('committed')")
            .execute(pool)
            .await
            .expect("autocommit insert");
        let mut other = SqliteConnection::connect(url).await.expect("other");
        let n: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM t WHERE x = 'committed'")
            .fetch_one(&mut other)
            .await
            .expect("count");
        n == 1
    }

    async fn scenario(hook: bool) -> bool {
        let dir = tempfile::tempdir().expect("dir");
        let url = format!("sqlite://{}", dir.path().join("t.db").display());
        let pool = pool(&url, "64", hook).await;
        sqlx::query("CREATE TABLE t (x TEXT)")
            .execute(&pool)
            .await
            .expect("table");
        fill_in_a_transaction(&pool).await;
        let ok = later_writes_are_committed(&url, &pool).await;
        pool.close().await;
        ok
    }

    #[tokio::test]
    async fn a_connection_whose_transaction_sqlite_ended_is_not_reused() {
        assert!(scenario(true).await, "a later autocommit write was lost");
    }

    /// The failure this guards against, shown without the guard: sqlx alone keeps
    /// counting the transaction SQLite ended, and swallows a later write.
    #[tokio::test]
    async fn without_the_check_a_later_write_is_swallowed() {
        assert!(!scenario(false).await, "sqlx no longer loses the write");
    }
}
