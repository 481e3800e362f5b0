//! A database that refuses writes the way a full disk does, and gets room back.
//!
//! SQLite: the file is given a ballast table, and the bridge's connections may grow it
//! only a few pages further (`PRAGMA max_page_count`, SQLite's own limit: it answers
//! `SQLITE_FULL` exactly as on a full file system). Deleting the ballast from another
//! connection frees pages inside the file: room again. Postgres: triggers on every table
//! of the migrated schema (read from the catalog, so a table a later migration adds is
//! covered too) raise `disk_full` (SQLSTATE 53100, the server's own code for ENOSPC)
//! while a flag is set.

use std::{sync::Arc, time::Duration};

use feishu_bridge::store::{Database, PgStore, SqliteStore, Store};
use sqlx::{Connection, PgConnection, SqliteConnection};

use super::db::{Kind, TestDb};

/// Pages the bridge may add to the SQLite file before it is full.
const SLACK_PAGES: i64 = 48;

/// How to fill the database and give it room again.
pub struct FullDisk {
    url: String,
    kind: Kind,
}

impl FullDisk {
    /// Migrates `db` and opens the bridge's store on it, ready to fill. On SQLite it is
    /// nearly full from the start; on Postgres it is full from [`Self::fill`] on.
    pub async fn open(db: &TestDb, timeout: Duration) -> (Arc<dyn Store>, Self) {
        let disk = Self {
            url: db.url.clone(),
            kind: db.kind,
        };
        let store: Arc<dyn Store> = match db.kind {
            Kind::Sqlite => {
                let pages = disk.prepare_sqlite(timeout).await;
                let options = SqliteStore::options(&db.url)
                    .expect("url")
                    .pragma("max_page_count", (pages + SLACK_PAGES).to_string());
                Arc::new(
                    SqliteStore::open_with(options, timeout)
                        .await
                        .expect("store"),
                )
            }
            Kind::Postgres => {
                let store = PgStore::open(&db.url, timeout, 16).await.expect("store");
                store.migrate().await.expect("migrate");
                disk.prepare_postgres().await;
                Arc::new(store)
            }
        };
        (store, disk)
    }

    /// Migrates, adds about 1 MiB of ballast; returns the file's page count.
    async fn prepare_sqlite(&self, timeout: Duration) -> i64 {
        let store = SqliteStore::open(&self.url, timeout).await.expect("store");
        store.migrate().await.expect("migrate");
        drop(store);
        let mut c = SqliteConnection::connect(&self.url).await.expect("connect");
        sqlx::query("CREATE TABLE ballast (pad TEXT NOT NULL)")
            .execute(&mut c)
            .await
            .expect("ballast table");
        sqlx::query(
            "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 256) \
             INSERT INTO ballast (pad) SELECT hex(randomblob(2000)) FROM n",
        )
        .execute(&mut c)
        .await
        .expect("ballast");
        sqlx::query("PRAGMA wal_checkpoint(TRUNCATE)")
            .execute(&mut c)
            .await
            .expect("checkpoint");
        sqlx::query_scalar("PRAGMA page_count")
            .fetch_one(&mut c)
            .await
            .expect("page count")
    }

    async fn prepare_postgres(&self) {
        let mut c = self.pg().await;
        let tables = migrated_tables(&mut c).await;
        sqlx::query("CREATE TABLE test_disk (full_now BOOLEAN NOT NULL)")
            .execute(&mut c)
            .await
            .expect("flag table");
        sqlx::query("INSERT INTO test_disk VALUES (FALSE)")
            .execute(&mut c)
            .await
            .expect("flag");
        sqlx::query(
            "CREATE FUNCTION test_disk_full() RETURNS trigger LANGUAGE plpgsql AS $$ \
             BEGIN \
               IF (SELECT full_now FROM test_disk) THEN \
                 RAISE EXCEPTION 'could not extend file: No space left on device' \
                   USING ERRCODE = 'disk_full'; \
               END IF; \
               RETURN NULL; \
             END $$",
        )
        .execute(&mut c)
        .await
        .expect("trigger function");
        for table in &tables {
            sqlx::query(&format!(
                "CREATE TRIGGER {table}_disk BEFORE INSERT OR UPDATE ON {table} \
                 FOR EACH STATEMENT EXECUTE FUNCTION test_disk_full()"
            ))
            .execute(&mut c)
            .await
            .expect("trigger");
        }
    }

    async fn pg(&self) -> PgConnection {
        PgConnection::connect(&self.url).await.expect("connect")
    }

    /// From now on every write fails as on a full disk (Postgres; SQLite fills by itself
    /// once the bridge has used its few pages).
    pub async fn fill(&self) {
        if self.kind == Kind::Postgres {
            sqlx::query("UPDATE test_disk SET full_now = TRUE")
                .execute(&mut self.pg().await)
                .await
                .expect("fill");
        }
    }

    /// Room again: the ballast is deleted (SQLite), the flag cleared (Postgres).
    pub async fn make_room(&self) {
        match self.kind {
            Kind::Sqlite => {
                let mut c = SqliteConnection::connect(&self.url).await.expect("connect");
                sqlx::query("DELETE FROM ballast")
                    .execute(&mut c)
                    .await
                    .expect("delete ballast");
            }
            Kind::Postgres => {
                sqlx::query("UPDATE test_disk SET full_now = FALSE")
                    .execute(&mut self.pg().await)
                    .await
                    .expect("make room");
            }
        }
    }
}

/// The tables of the schema the migrations made (the one the URL's `search_path` names),
/// without sqlx's own record of the migrations, which only `migrate` writes.
async fn migrated_tables(c: &mut PgConnection) -> Vec<String> {
    let tables: Vec<String> = sqlx::query_scalar(
        "SELECT tablename::text FROM pg_tables \
         WHERE schemaname = current_schema() AND tablename <> '_sqlx_migrations' \
         ORDER BY tablename",
    )
    .fetch_all(c)
    .await
    .expect("the schema's tables");
    assert!(
        tables.iter().any(|t| t == "inbox_events"),
        "the migrated schema has no inbox_events: {tables:?}"
    );
    tables
}
