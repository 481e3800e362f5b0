//! The SQL of every store surface, written once for both backends.
//!
//! SQLite accepts the same `$n` placeholders as Postgres, so each statement is written
//! once. The `impl_*!` macros implement a surface's trait for a backend type with `pool`
//! and `timeout` fields: the method bodies are written once here and type-checked
//! against each backend's own pool; what differs is passed in (the backend tag, its
//! migrator, the claim's row lock, the statement that begins a write transaction).
//! `writes` holds the statements several surfaces share and uses no other module here.

pub(crate) mod connection;
pub(crate) mod database;
pub(crate) mod decisions;
pub(crate) mod event_log;
pub(crate) mod inbox;
pub(crate) mod outbound;
pub(crate) mod sessions;
pub(crate) mod turns;
pub(crate) mod writes;
