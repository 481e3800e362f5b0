//! The database as a whole: which backend, its migrations, and whether it answers and
//! takes writes.

use async_trait::async_trait;

use super::{Backend, StoreError};
use crate::util::UnixMs;

/// The database as a whole.
#[async_trait]
pub trait Database: Send + Sync + 'static {
    /// Which backend this is.
    fn backend(&self) -> Backend;
    /// Applies pending migrations.
    async fn migrate(&self) -> Result<(), StoreError>;
    /// A cheap round trip, for `/status`.
    async fn ping(&self) -> Result<(), StoreError>;
    /// Proves the database takes writes, for `/readyz`: room for a few pages is allocated
    /// (and given back) and a small row is committed. Fails while the disk or the
    /// database is full, read-only or unreachable.
    async fn probe_write(&self, now: UnixMs) -> Result<(), StoreError>;
}
