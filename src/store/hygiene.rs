//! Connections whose transaction state is in doubt never go back to the pool.
//!
//! SQLite rolls a whole transaction back by itself on some errors (`SQLITE_FULL`,
//! `SQLITE_IOERR`, …). sqlx's own `ROLLBACK` then fails ("no transaction is active") and
//! sqlx keeps counting the transaction; the next `begin()` on that connection becomes a
//! `SAVEPOINT` that opens a real transaction nobody commits, and every later autocommit
//! statement on it is silently swallowed. So on every release the pool checks that the
//! connection is outside any transaction — by SQLite's own state and by sqlx's count —
//! and closes it otherwise. A dropped operation (a timeout) is covered the same way.

use std::{future::Future, pin::Pin};

use sqlx::{Connection, PgConnection, SqliteConnection, pool::PoolConnectionMetadata};

/// What a pool hook returns.
type Verdict<'c> = Pin<Box<dyn Future<Output = Result<bool, sqlx::Error>> + Send + 'c>>;

/// `after_release` hook of the SQLite pool: `Ok(true)` keeps the connection.
pub(crate) fn sqlite_after_release(
    conn: &mut SqliteConnection,
    _: PoolConnectionMetadata,
) -> Verdict<'_> {
    Box::pin(async move {
        // A `BEGIN` fails inside a transaction. It also runs after anything still queued
        // on the connection (a dropped transaction's rollback), so sqlx's count is
        // settled when it is read below.
        let outside = sqlx::query("BEGIN").execute(&mut *conn).await.is_ok()
            && sqlx::query("ROLLBACK").execute(&mut *conn).await.is_ok()
            && !conn.is_in_transaction();
        if !outside {
            tracing::warn!("a SQLite connection left inside a transaction was closed");
        }
        Ok(outside)
    })
}

/// `after_release` hook of the Postgres pool: a connection sqlx still counts inside a
/// transaction is closed (the server then rolls back whatever it held).
pub(crate) fn pg_after_release(conn: &mut PgConnection, _: PoolConnectionMetadata) -> Verdict<'_> {
    Box::pin(async move {
        let outside = !conn.is_in_transaction();
        if !outside {
            tracing::warn!("a Postgres connection left inside a transaction was closed");
        }
        Ok(outside)
    })
}

#[cfg(test)]
mod tests {
    use std::str::FromStr;

    use sqlx::{
        Connection, SqliteConnection,
        sqlite::{SqliteConnectOptions, SqlitePoolOptions},
    };

    use super::sqlite_after_release;

    /// A one-connection pool whose connections may grow the file to `pages` pages.
    async fn pool(url: &str, pages: &str, hook: bool) -> sqlx::SqlitePool {
        let options = SqliteConnectOptions::from_str(url)
            .expect("url")
            .create_if_missing(true)
            .journal_mode(sqlx::sqlite::SqliteJournalMode::Wal)
            .pragma("max_page_count", pages.to_string());
        let mut pool = SqlitePoolOptions::new().max_connections(1);
        if hook {
            pool = pool.after_release(sqlite_after_release);
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
