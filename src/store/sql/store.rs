//! The one store type over either database, and the few ways it runs a statement:
//! bounded reads, bounded single writes, write transactions, own connections.

use std::{
    future::Future,
    ops::{Deref, DerefMut},
    time::Duration,
};

use sqlx::{Database, Pool, Transaction, pool::PoolConnection};

use super::dialect::Dialect;
use crate::store::{NewInboxEvent, StoreError, bounded, writer_gate::WriteTurn};

/// The store on one database (`DB` is `sqlx::Sqlite` or `sqlx::Postgres`): its pool, the
/// bound of every operation, and what the database keeps besides (see
/// [`Dialect::State`]). Every store surface is implemented once for it.
pub struct SqlStore<DB: Dialect> {
    pub(crate) pool: Pool<DB>,
    pub(crate) timeout: Duration,
    pub(crate) state: DB::State,
}

impl<DB: Dialect> Clone for SqlStore<DB> {
    fn clone(&self) -> Self {
        Self {
            pool: self.pool.clone(),
            timeout: self.timeout,
            state: self.state.clone(),
        }
    }
}

impl<DB: Dialect> std::fmt::Debug for SqlStore<DB> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqlStore")
            .field("pool", &self.pool)
            .field("timeout", &self.timeout)
            .field("state", &self.state)
            .finish()
    }
}

/// A write transaction in the writer's turn (see `writer_gate`). It derefs to its
/// connection; dropped without [`Write::commit`], it rolls back.
pub(crate) struct Write<'s, DB: Dialect> {
    // Declared first, so dropped first: the rollback is queued before the turn passes.
    tx: Transaction<'static, DB>,
    _turn: Option<WriteTurn<'s>>,
}

impl<DB: Dialect> Write<'_, DB> {
    /// Commits the transaction.
    pub(crate) async fn commit(self) -> Result<(), StoreError> {
        Ok(self.tx.commit().await?)
    }

    /// Rolls the transaction back.
    pub(crate) async fn rollback(self) -> Result<(), StoreError> {
        Ok(self.tx.rollback().await?)
    }
}

impl<DB: Dialect> Deref for Write<'_, DB> {
    type Target = <DB as Database>::Connection;

    fn deref(&self) -> &Self::Target {
        &self.tx
    }
}

impl<DB: Dialect> DerefMut for Write<'_, DB> {
    fn deref_mut(&mut self) -> &mut Self::Target {
        &mut self.tx
    }
}

impl<DB: Dialect> SqlStore<DB> {
    /// Bounds an operation by the store's timeout.
    pub(crate) async fn bounded<T>(
        &self,
        op: impl Future<Output = Result<T, StoreError>>,
    ) -> Result<T, StoreError> {
        bounded(self.timeout, op).await
    }

    /// One bounded read (or a write that needs no turn) on the pool:
    /// `self.fetch(query(…).bind(…).fetch_all(&self.pool))`.
    pub(crate) async fn fetch<T>(
        &self,
        op: impl Future<Output = Result<T, sqlx::Error>>,
    ) -> Result<T, StoreError> {
        bounded(self.timeout, async { Ok(op.await?) }).await
    }

    /// One bounded write that returns no rows, on the pool, in the writer's turn; how
    /// many rows it changed.
    pub(crate) async fn execute<'q>(
        &self,
        query: sqlx::query::Query<'q, DB, <DB as Database>::Arguments<'q>>,
    ) -> Result<u64, StoreError> {
        bounded(self.timeout, async {
            let _turn = self.write_turn().await;
            let done = query.execute(self.writes()).await?;
            Ok(DB::rows_affected(&done))
        })
        .await
    }

    /// Writes a group commit of the inbox (see [`Dialect::write_inbox`]).
    pub(crate) async fn write_inbox(
        &self,
        q: &str,
        events: &[&NewInboxEvent],
    ) -> Result<Vec<(String, String)>, StoreError> {
        DB::write_inbox(&self.pool, &self.state, q, events).await
    }

    /// The pool writes go through (see [`Dialect::writes`]).
    pub(crate) fn writes(&self) -> &Pool<DB> {
        DB::writes(&self.pool, &self.state)
    }

    /// The writer's turn, when writers take turns (see `writer_gate`).
    async fn write_turn(&self) -> Option<WriteTurn<'_>> {
        DB::write_turn(&self.state).await
    }

    /// Begins a write transaction in the writer's turn. Bound it together with what it
    /// runs (`self.bounded(async { … })`), waiting for the turn included.
    pub(crate) async fn transaction(&self) -> Result<Write<'_, DB>, StoreError> {
        let turn = self.write_turn().await;
        Ok(Write {
            tx: self.writes().begin().await?,
            _turn: turn,
        })
    }
}

/// Closes `conn` instead of giving it back to the pool when `result` is a failure:
/// whatever the failure left of its transaction is never seen by another caller.
pub(crate) fn close_on_failure<DB: Database, T, E>(
    mut conn: PoolConnection<DB>,
    result: Result<T, E>,
) -> Result<T, E> {
    if result.is_err() {
        conn.close_on_drop();
    }
    result
}
