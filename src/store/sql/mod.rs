//! The SQL of every store surface, written once for both backends.
//!
//! SQLite accepts the same `$n` placeholders as Postgres, so each statement is written
//! once, and each surface's trait is implemented once, as generic code, for
//! [`store::SqlStore`]: `SqliteStore` and `PgStore` are its two instances. What the code
//! needs of a database, and what really differs between the two (the migrator, the
//! statement that begins a write transaction, the claim's row lock, the statements that
//! serialise claims and call recordings, placeholder numbering, the writer's turn, the
//! inbox's group commit), is the [`dialect::Dialect`] trait, which `sqlx::Sqlite` and
//! `sqlx::Postgres` implement in `sqlite.rs` and `postgres.rs`. `writes` holds the
//! statements several surfaces share and uses no other statement module.

pub(crate) mod api_calls;
pub(crate) mod asks;
pub(crate) mod database;
pub(crate) mod decisions;
pub(crate) mod dialect;
pub(crate) mod digests;
pub(crate) mod event_log;
pub(crate) mod event_log_as_of;
pub(crate) mod feed;
pub(crate) mod handoffs;
pub(crate) mod inbox;
pub(crate) mod inbox_depth;
pub(crate) mod media;
pub(crate) mod names;
pub(crate) mod outbound;
pub(crate) mod routes;
pub(crate) mod rungs;
pub(crate) mod sessions;
pub(crate) mod store;
pub(crate) mod timeline;
pub(crate) mod turn_events;
pub(crate) mod turn_leases;
pub(crate) mod turns;
pub(crate) mod writes;
