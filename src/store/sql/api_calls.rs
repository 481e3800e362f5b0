//! SQL of the [`crate::store::ApiCalls`]: one transaction per call, taken in turns.

/// Calls of an app that have left the minute.
pub(crate) const PRUNE: &str = "DELETE FROM api_calls WHERE app_id = $1 AND at_ms <= $2";

/// The app's calls in the minute (their count and the oldest) and in the second before
/// `$2` (the same).
pub(crate) const WINDOWS: &str = "\
SELECT COUNT(*),
       MIN(at_ms),
       COALESCE(SUM(CASE WHEN at_ms > $2 THEN 1 ELSE 0 END), 0),
       MIN(CASE WHEN at_ms > $2 THEN at_ms END)
FROM api_calls WHERE app_id = $1";

pub(crate) const RECORD: &str = "INSERT INTO api_calls (app_id, at_ms) VALUES ($1, $2)";

/// The verdict on a call at `now` given the app's windows.
pub(crate) fn room(
    now: crate::util::UnixMs,
    (minute, oldest, second, oldest_in_second): (i64, Option<i64>, i64, Option<i64>),
    limits: crate::store::CallLimits,
) -> Option<crate::store::CallRoom> {
    use crate::{store::CallRoom, util::UnixMs};
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

/// Implements [`crate::store::ApiCalls`] for a backend type with `pool` and `timeout`
/// fields; `$serialize` makes the transactions of every replica take turns (SQLite's
/// one writer already does).
macro_rules! impl_api_calls {
    ($ty:ty, $serialize:expr) => {
        #[async_trait::async_trait]
        impl $crate::store::ApiCalls for $ty {
            async fn record_call(
                &self,
                app_id: &str,
                clock: &dyn $crate::util::Clock,
                limits: $crate::store::CallLimits,
            ) -> Result<$crate::store::CallRoom, $crate::store::StoreError> {
                use $crate::store::sql::{
                    api_calls::{PRUNE, RECORD, WINDOWS, room},
                    transaction, within,
                };
                transaction!(self, |tx| {
                    for statement in $serialize {
                        within!(tx, query, execute, *statement);
                    }
                    // Read once the other replicas' recordings are done (see the trait).
                    let now = clock.now();
                    within!(tx, query, execute, PRUNE, app_id, now.0 - 60_000);
                    let windows: (i64, Option<i64>, i64, Option<i64>) =
                        within!(tx, query_as, fetch_one, WINDOWS, app_id, now.0 - 1_000);
                    match room(now, windows, limits) {
                        Some(full) => full,
                        None => {
                            within!(tx, query, execute, RECORD, app_id, now.0);
                            $crate::store::CallRoom::Taken
                        }
                    }
                })
            }
        }
    };
}
pub(crate) use impl_api_calls;
