//! Per-test databases: a fresh SQLite file, or a fresh Postgres schema, removed on drop.
//!
//! Postgres comes from `FEISHU_BRIDGE_TEST_PG_URL` (default: the local server's `test`
//! database). When the build finds it unreachable, the Postgres tests are compiled as
//! ignored (`build.rs`; the tests notice when that changes, see `environment.rs`), unless
//! `FEISHU_BRIDGE_TEST_REQUIRE_PG=1` (set by CI): then they run, and fail when it cannot
//! be reached.

use std::{
    str::FromStr,
    sync::OnceLock,
    time::{Duration, SystemTime, UNIX_EPOCH},
};

use sqlx::{Connection, PgConnection, postgres::PgConnectOptions};

const PREFIX: &str = "fbt_";

/// Which backend a test runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// SQLite file.
    Sqlite,
    /// Postgres schema.
    Postgres,
}

/// A database that exists for one test.
pub struct TestDb {
    /// URL for the bridge config.
    pub url: String,
    /// Backend.
    pub kind: Kind,
    _dir: Option<tempfile::TempDir>,
    schema: Option<String>,
}

impl std::fmt::Debug for TestDb {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "TestDb({:?})", self.kind)
    }
}

/// The base Postgres URL for tests.
pub fn pg_base_url() -> String {
    super::probe::pg_url()
}

fn unique(prefix: &str) -> String {
    let secs = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or_default();
    format!("{prefix}{secs}_{:08x}", rand::random::<u32>())
}

impl TestDb {
    /// A fresh SQLite file in a temporary directory.
    pub fn sqlite() -> Self {
        super::environment::check();
        let dir = tempfile::tempdir().expect("temp dir");
        let url = format!("sqlite://{}", dir.path().join("bridge.db").display());
        Self {
            url,
            kind: Kind::Sqlite,
            _dir: Some(dir),
            schema: None,
        }
    }

    /// A fresh Postgres schema. Postgres tests are compiled as ignored when the build
    /// found it unreachable (see `build.rs`); one that runs and cannot reach it fails.
    pub async fn postgres() -> Self {
        super::environment::check();
        let base = pg_base_url();
        let mut conn = match tokio::time::timeout(
            Duration::from_secs(5),
            PgConnection::connect(&base),
        )
        .await
        {
            Ok(Ok(c)) => c,
            outcome => {
                let why = match outcome {
                    Ok(Err(e)) => e.to_string(),
                    _ => "timed out".into(),
                };
                if super::environment::pg_gone_since_build() {
                    panic!(
                        "Postgres is unreachable at {base}: {why}. It answered when the tests \
                         were built; the next `cargo test` builds the Postgres tests as ignored"
                    );
                }
                let required = if super::probe::required(super::probe::REQUIRE_PG) {
                    " (FEISHU_BRIDGE_TEST_REQUIRE_PG=1: the Postgres tests must run)"
                } else {
                    ""
                };
                panic!("Postgres is unreachable at {base}: {why}{required}");
            }
        };
        sweep_old_schemas(&mut conn).await;
        let schema = unique(PREFIX);
        sqlx::query(&format!("CREATE SCHEMA {schema}"))
            .execute(&mut conn)
            .await
            .expect("create schema");
        let url = with_search_path(&base, &schema);
        Self {
            url,
            kind: Kind::Postgres,
            _dir: None,
            schema: Some(schema),
        }
    }

    /// Counts the rows of a table, straight from the database.
    pub async fn count(&self, table: &str) -> i64 {
        self.scalar(&format!("SELECT COUNT(*) FROM {table}")).await
    }

    /// Runs statements (each may be several, as `raw_sql` takes them) straight on the
    /// database, on one connection: a test reaching past the bridge to break something.
    pub async fn exec(&self, statements: &[&str]) {
        match self.kind {
            Kind::Sqlite => {
                let mut c = sqlx::SqliteConnection::connect(&self.url)
                    .await
                    .expect("connect");
                for q in statements {
                    sqlx::raw_sql(q).execute(&mut c).await.expect(q);
                }
            }
            Kind::Postgres => {
                let mut c = PgConnection::connect(&self.url).await.expect("connect");
                for q in statements {
                    sqlx::raw_sql(q).execute(&mut c).await.expect(q);
                }
            }
        }
    }

    /// Runs a query returning one integer, straight on the database.
    pub async fn scalar(&self, q: &str) -> i64 {
        match self.kind {
            Kind::Sqlite => {
                let mut c = sqlx::SqliteConnection::connect(&self.url)
                    .await
                    .expect("connect");
                sqlx::query_scalar(q)
                    .fetch_one(&mut c)
                    .await
                    .expect("count")
            }
            Kind::Postgres => {
                let mut c = PgConnection::connect(&self.url).await.expect("connect");
                sqlx::query_scalar(q)
                    .fetch_one(&mut c)
                    .await
                    .expect("count")
            }
        }
    }
}

impl TestDb {
    /// The plan the database would take for `q` (`EXPLAIN QUERY PLAN` on SQLite,
    /// `EXPLAIN` on Postgres), one line per step.
    pub async fn plan(&self, q: &str) -> String {
        let lines: Vec<String> = match self.kind {
            Kind::Sqlite => {
                let mut c = sqlx::SqliteConnection::connect(&self.url)
                    .await
                    .expect("connect");
                let rows: Vec<(i64, i64, i64, String)> =
                    sqlx::query_as(&format!("EXPLAIN QUERY PLAN {q}"))
                        .fetch_all(&mut c)
                        .await
                        .expect(q);
                rows.into_iter().map(|r| r.3).collect()
            }
            Kind::Postgres => {
                let mut c = PgConnection::connect(&self.url).await.expect("connect");
                sqlx::query_scalar(&format!("EXPLAIN {q}"))
                    .fetch_all(&mut c)
                    .await
                    .expect(q)
            }
        };
        lines.join("\n")
    }
}

/// Adds `options=-c search_path=<schema>` (and names the connections after the schema,
/// so cleanup can find them) to a Postgres URL.
pub fn with_search_path(base: &str, schema: &str) -> String {
    let sep = if base.contains('?') { '&' } else { '?' };
    format!("{base}{sep}options=-c%20search_path%3D{schema}&application_name={schema}")
}

/// Leftovers of crashed runs: schemas with our prefix older than two hours.
async fn sweep_old_schemas(conn: &mut PgConnection) {
    static SWEPT: OnceLock<()> = OnceLock::new();
    if SWEPT.set(()).is_err() {
        return;
    }
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or_default();
    let names: Vec<String> =
        sqlx::query_scalar("SELECT nspname::text FROM pg_namespace WHERE nspname LIKE 'fbt\\_%'")
            .fetch_all(&mut *conn)
            .await
            .unwrap_or_default();
    for name in names {
        let secs: Option<u64> = name
            .strip_prefix(PREFIX)
            .and_then(|rest| rest.split('_').next())
            .and_then(|s| s.parse().ok());
        if secs.is_some_and(|s| s + 7200 < now) {
            let _ = sqlx::query(&format!("DROP SCHEMA IF EXISTS {name} CASCADE"))
                .execute(&mut *conn)
                .await;
        }
    }
}

impl Drop for TestDb {
    fn drop(&mut self) {
        let Some(schema) = self.schema.take() else {
            return;
        };
        let base = pg_base_url();
        // Drop runs outside any runtime guarantee: use a private one on its own thread.
        let _ = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build();
            if let Ok(rt) = rt {
                rt.block_on(async {
                    if let Ok(opts) = PgConnectOptions::from_str(&base)
                        && let Ok(mut c) = PgConnection::connect_with(&opts).await
                    {
                        // Connections a test left open (say, a task still holding a
                        // transaction) would block the drop: end them first.
                        let _ = sqlx::query(
                            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1",
                        )
                        .bind(&schema)
                        .execute(&mut c)
                        .await;
                        let _ = sqlx::query("SET lock_timeout = '10s'").execute(&mut c).await;
                        let _ = sqlx::query(&format!("DROP SCHEMA IF EXISTS {schema} CASCADE"))
                            .execute(&mut c)
                            .await;
                    }
                });
            }
        })
        .join();
    }
}
