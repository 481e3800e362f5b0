//! SQL of the [`crate::store::ApiCalls`]: one transaction per call, taken in turns.

use async_trait::async_trait;

use super::{dialect::Dialect, store::SqlStore};
use crate::{
    store::{ApiCalls, CallLimits, CallRoom, StoreError},
    util::{Clock, UnixMs},
};

/// Calls of an app that have left the minute.
const PRUNE: &str = "DELETE FROM api_calls WHERE app_id = $1 AND at_ms <= $2";

/// The app's calls in the minute (their count and the oldest) and in the second before
/// `$2` (the same).
const WINDOWS: &str = "\
SELECT COUNT(*),
       MIN(at_ms),
       COALESCE(SUM(CASE WHEN at_ms > $2 THEN 1 ELSE 0 END), 0),
       MIN(CASE WHEN at_ms > $2 THEN at_ms END)
FROM api_calls WHERE app_id = $1";

const RECORD: &str = "INSERT INTO api_calls (app_id, at_ms) VALUES ($1, $2)";

/// The verdict on a call at `now` given the app's windows.
fn room(
    now: UnixMs,
    (minute, oldest, second, oldest_in_second): (i64, Option<i64>, i64, Option<i64>),
    limits: CallLimits,
) -> Option<CallRoom> {
    if minute >= i64::from(limits.per_minute) {
        return Some(CallRoom::FullUntil(UnixMs(
            oldest.unwrap_or(now.0) + 60_000,
        )));
    }
    if second >= i64::from(limits.per_second) {
        return Some(CallRoom::FullUntil(UnixMs(
            oldest_in_second.unwrap_or(now.0) + 1_000,
        )));
    }
    None
}

/// One transaction per call; the dialect's statements make the transactions of every
/// replica take turns (SQLite's one writer already does).
#[async_trait]
impl<DB: Dialect> ApiCalls for SqlStore<DB> {
    async fn record_call(
        &self,
        app_id: &str,
        clock: &dyn Clock,
        limits: CallLimits,
    ) -> Result<CallRoom, StoreError> {
        self.bounded(async {
            let mut tx = self.transaction().await?;
            for statement in DB::CALLS_SERIALIZE {
                sqlx::query(statement).execute(&mut *tx).await?;
            }
            // Read once the other replicas' recordings are done (see the trait).
            let now = clock.now();
            sqlx::query(PRUNE)
                .bind(app_id)
                .bind(now.0 - 60_000)
                .execute(&mut *tx)
                .await?;
            let windows: (i64, Option<i64>, i64, Option<i64>) = sqlx::query_as(WINDOWS)
                .bind(app_id)
                .bind(now.0 - 1_000)
                .fetch_one(&mut *tx)
                .await?;
            let taken = match room(now, windows, limits) {
                Some(full) => full,
                None => {
                    sqlx::query(RECORD)
                        .bind(app_id)
                        .bind(now.0)
                        .execute(&mut *tx)
                        .await?;
                    CallRoom::Taken
                }
            };
            tx.commit().await?;
            Ok(taken)
        })
        .await
    }
}
