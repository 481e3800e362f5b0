//! A database made slow on purpose: a second connection holding the lock the bridge's
//! inbox writes need, until the test releases it.

use sqlx::{Connection, PgConnection, SqliteConnection};

use super::{Kind, TestDb};

/// A second connection holding the lock every write of the bridge's inbox needs:
/// SQLite's write lock, or Postgres's strongest lock on `inbox_events`.
pub enum Lock {
    Sqlite(SqliteConnection),
    Postgres(PgConnection),
}

impl Lock {
    pub async fn take(db: &TestDb) -> Self {
        match db.kind {
            Kind::Sqlite => {
                let mut c = SqliteConnection::connect(&db.url).await.expect("connect");
                sqlx::query("BEGIN IMMEDIATE")
                    .execute(&mut c)
                    .await
                    .expect("write lock taken");
                Self::Sqlite(c)
            }
            Kind::Postgres => {
                let mut c = PgConnection::connect(&db.url).await.expect("connect");
                sqlx::query("BEGIN").execute(&mut c).await.expect("begin");
                sqlx::query("LOCK TABLE inbox_events IN ACCESS EXCLUSIVE MODE")
                    .execute(&mut c)
                    .await
                    .expect("table locked");
                Self::Postgres(c)
            }
        }
    }

    /// Makes the bridge's writes that wait for this lock fail (Postgres: their
    /// connections are ended); returns how many there were.
    pub async fn fail_waiting_writes(&mut self) -> i64 {
        let Self::Postgres(c) = self else {
            panic!("only Postgres writes can be failed from outside");
        };
        sqlx::query_scalar(
            "SELECT COUNT(pg_terminate_backend(pid)) FROM pg_stat_activity \
             WHERE application_name = current_setting('application_name') \
             AND pid <> pg_backend_pid() AND wait_event_type = 'Lock'",
        )
        .fetch_one(c)
        .await
        .expect("waiting writes ended")
    }

    pub async fn release(self) {
        match self {
            Self::Sqlite(mut c) => {
                sqlx::query("ROLLBACK")
                    .execute(&mut c)
                    .await
                    .expect("lock released");
            }
            Self::Postgres(mut c) => {
                sqlx::query("ROLLBACK")
                    .execute(&mut c)
                    .await
                    .expect("lock released");
            }
        }
    }
}
