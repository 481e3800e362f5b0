//! SQL of the [`crate::store::Database`] surface: migrations, the ping, the write probe.

use async_trait::async_trait;
use sqlx::Connection;

use super::{
    dialect::Dialect,
    store::{SqlStore, close_on_failure},
};
use crate::{
    store::{Backend, Database, StoreError},
    util::UnixMs,
};

/// The write probe's committed row.
const PROBE_MARK: &str = "INSERT INTO write_probe (id, probed_at, pad) \
     VALUES (1, $1, '') ON CONFLICT (id) DO UPDATE SET probed_at = excluded.probed_at";
/// The write probe's room check, always rolled back.
const PROBE_ROOM: &str = "INSERT INTO write_probe (id, probed_at, pad) VALUES (2, $1, $2)";

/// What the room check writes: 64 KiB that no page compression shrinks, so the database
/// must find fresh pages for it.
fn probe_pad() -> &'static str {
    static PAD: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    PAD.get_or_init(|| {
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        (0..64 * 1024)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                char::from(b"0123456789abcdef"[(x & 15) as usize])
            })
            .collect()
    })
}

#[async_trait]
impl<DB: Dialect> Database for SqlStore<DB> {
    fn backend(&self) -> Backend {
        DB::BACKEND
    }

    async fn migrate(&self) -> Result<(), StoreError> {
        DB::MIGRATOR.run(&self.pool).await?;
        Ok(())
    }

    async fn ping(&self) -> Result<(), StoreError> {
        self.fetch(sqlx::query("SELECT 1").execute(&self.pool))
            .await
            .map(drop)
    }

    async fn probe_write(&self, now: UnixMs) -> Result<(), StoreError> {
        self.bounded(async {
            let mut conn = self.pool.acquire().await?;
            let result = probe::<DB>(&mut conn, now).await;
            close_on_failure(conn, result)
        })
        .await
    }
}

/// The write probe on a connection of its own: room for a few fresh pages, given back
/// at once, and a small row committed.
async fn probe<DB: Dialect>(conn: &mut DB::Connection, now: UnixMs) -> Result<(), StoreError> {
    let mut tx = conn.begin_with(DB::BEGIN_WRITE).await?;
    let mut room = Connection::begin(&mut *tx).await?;
    sqlx::query(PROBE_ROOM)
        .bind(now)
        .bind(probe_pad())
        .execute(&mut *room)
        .await?;
    room.rollback().await?;
    sqlx::query(PROBE_MARK).bind(now).execute(&mut *tx).await?;
    tx.commit().await?;
    Ok(())
}
