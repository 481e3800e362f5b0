//! The SQL of every store surface, written once for both backends.
//!
//! SQLite accepts the same `$n` placeholders as Postgres, so each statement is written
//! once. The `impl_*!` macros implement a surface's trait for a backend type with `pool`
//! and `timeout` fields: the method bodies are written once here and type-checked
//! against each backend's own pool; what differs is passed in (the backend tag, its
//! migrator, the claim's row lock, the statement that begins a write transaction).
//! `writes` holds the statements several surfaces share and uses no other module here.

pub(crate) mod api_calls;
pub(crate) mod database;
pub(crate) mod decisions;
pub(crate) mod dialect;
pub(crate) mod digests;
pub(crate) mod event_log;
pub(crate) mod feed;
pub(crate) mod inbox;
pub(crate) mod outbound;
pub(crate) mod sessions;
pub(crate) mod store;
pub(crate) mod turn_leases;
pub(crate) mod turns;
pub(crate) mod writes;

/// One bounded statement that fetches, on `$store`'s pool, typed by the calling
/// method's return type: `fetch!(self, query_as, fetch_all, sql, bind, …)`.
macro_rules! fetch {
    ($store:ident, $kind:ident, $fetch:ident, $sql:expr $(, $arg:expr)* $(,)?) => {
        $crate::store::bounded($store.timeout, async {
            Ok(sqlx::$kind($sql)$(.bind($arg))*.$fetch(&$store.pool).await?)
        })
        .await
    };
}
pub(crate) use fetch;

/// Every store surface for the backend type `$store`: `$begin` is its statement that
/// begins a write transaction, `$claim_lock` the row lock of an inbox claim,
/// `$claim_serialize` the statement that makes claims take turns, `$calls_serialize` the
/// statements that make the recording of Open API calls take turns.
macro_rules! impl_store {
    ($store:ty, $backend:expr, $claim_lock:expr, $claim_serialize:expr, $calls_serialize:expr) => {
        $crate::store::sql::event_log::impl_event_log!($store);
    };
}
pub(crate) use impl_store;

/// One write transaction on `$store`'s pool, in the writer's turn (see `writer_gate`),
/// bounded as a whole, waiting for the turn included:
/// `transaction!(self, |tx| { …; value })` runs the block with `tx` open and answers its
/// value once the commit succeeded. A `?` or `return` inside leaves without committing
/// (the transaction rolls back when `tx` drops).
macro_rules! transaction {
    ($store:ident, |$tx:ident| $body:block) => {
        $store
            .bounded(async {
                let mut $tx = $store.transaction().await?;
                let value = $body;
                $tx.commit().await?;
                Ok(value)
            })
            .await
    };
}
pub(crate) use transaction;

/// One statement inside an open transaction `$tx`, its error returned with `?`:
/// `within!(tx, query, execute, sql, bind, …)` or `within!(tx, query_as, fetch_one, …)`.
macro_rules! within {
    ($tx:ident, $kind:ident, $run:ident, $sql:expr $(, $arg:expr)* $(,)?) => {
        sqlx::$kind($sql)$(.bind($arg))*.$run(&mut *$tx).await?
    };
}
pub(crate) use within;
