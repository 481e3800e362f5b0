//! SQL of the [`crate::store::Database`] surface: migrations, the ping, the write probe.

/// The write probe's committed row.
pub(crate) const PROBE_MARK: &str = "INSERT INTO write_probe (id, probed_at, pad) \
     VALUES (1, $1, '') ON CONFLICT (id) DO UPDATE SET probed_at = excluded.probed_at";
/// The write probe's room check, always rolled back.
pub(crate) const PROBE_ROOM: &str =
    "INSERT INTO write_probe (id, probed_at, pad) VALUES (2, $1, $2)";

/// What the room check writes: 64 KiB that no page compression shrinks, so the database
/// must find fresh pages for it.
pub(crate) fn probe_pad() -> &'static str {
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

/// Implements [`crate::store::Database`] for a backend type with `pool` and `timeout`
/// fields (see `sql` for why this is a macro).
macro_rules! impl_database {
    ($ty:ty, $backend:expr, $migrator:expr, $begin_write:expr) => {
        #[async_trait::async_trait]
        impl $crate::store::Database for $ty {
            fn backend(&self) -> $crate::store::Backend {
                $backend
            }

            async fn migrate(&self) -> Result<(), $crate::store::StoreError> {
                $migrator.run(&self.pool).await?;
                Ok(())
            }

            async fn ping(&self) -> Result<(), $crate::store::StoreError> {
                $crate::store::sql::fetch!(self, query, execute, "SELECT 1").map(drop)
            }

            async fn probe_write(
                &self,
                now: $crate::util::UnixMs,
            ) -> Result<(), $crate::store::StoreError> {
                use sqlx::Connection as _;
                $crate::store::bounded(self.timeout, async {
                    $crate::store::sql::connection::on_own_connection!(self.pool, |conn| async {
                        let mut tx = conn.begin_with($begin_write).await?;
                        // Room for a few fresh pages, given back at once ...
                        let mut room = sqlx::Connection::begin(&mut *tx).await?;
                        sqlx::query($crate::store::sql::database::PROBE_ROOM)
                            .bind(now)
                            .bind($crate::store::sql::database::probe_pad())
                            .execute(&mut *room)
                            .await?;
                        room.rollback().await?;
                        // ... and a small row committed.
                        sqlx::query($crate::store::sql::database::PROBE_MARK)
                            .bind(now)
                            .execute(&mut *tx)
                            .await?;
                        tx.commit().await?;
                        Ok::<_, $crate::store::StoreError>(())
                    })
                })
                .await
            }
        }
    };
}
pub(crate) use impl_database;
