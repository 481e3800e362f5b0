//! Turn writes that outlast a database failure.
//!
//! Once a turn has started, what it must record (its answer before posting it, its end
//! after) is retried until the database takes it — a full disk or a restarting server
//! only delays the turn — or until the bridge shuts down, when recovery finishes the turn
//! at the next start. What the database refuses outright is not retried.

use std::{future::Future, time::Duration};

use tokio_util::sync::CancellationToken;

use crate::{feishu_api::outbound::OutboundError, store::StoreError};

/// An error that may be the database's alone.
pub(super) trait MayBeDatabase: std::fmt::Display {
    /// Retrying after the database is back can succeed.
    fn database_failed(&self) -> bool;
}

impl MayBeDatabase for StoreError {
    fn database_failed(&self) -> bool {
        StoreError::database_failed(self)
    }
}

impl MayBeDatabase for OutboundError {
    fn database_failed(&self) -> bool {
        OutboundError::database_failed(self)
    }
}

/// The pause before retry number `failures` (from 1): 100 ms doubling, at most 5 s.
pub(super) fn pause(failures: u32) -> Duration {
    let factor = 1u32 << failures.saturating_sub(1).min(6);
    (Duration::from_millis(100) * factor).min(Duration::from_secs(5))
}

/// Runs `op` until it succeeds, fails for a reason other than the database, or
/// `shutdown` is cancelled (the last error is returned then).
pub(super) async fn persist<T, E, Fut>(
    shutdown: &CancellationToken,
    what: &'static str,
    turn_id: &str,
    mut op: impl FnMut() -> Fut,
) -> Result<T, E>
where
    E: MayBeDatabase,
    Fut: Future<Output = Result<T, E>>,
{
    let mut failures = 0u32;
    loop {
        match op().await {
            Ok(v) => {
                if failures > 0 {
                    tracing::info!(
                        turn_id,
                        what,
                        failures,
                        "the database took the turn's write"
                    );
                }
                return Ok(v);
            }
            Err(e) if e.database_failed() => {
                failures += 1;
                if failures == 1 {
                    tracing::warn!(turn_id, what, error = %e, "the database failed; retrying the turn's write");
                }
                tokio::select! {
                    () = tokio::time::sleep(pause(failures)) => {}
                    () = shutdown.cancelled() => return Err(e),
                }
            }
            Err(e) => return Err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pause_doubles_from_a_tenth_of_a_second_up_to_five() {
        assert_eq!(pause(1), Duration::from_millis(100));
        assert_eq!(pause(2), Duration::from_millis(200));
        assert_eq!(pause(6), Duration::from_millis(3200));
        assert_eq!(pause(7), Duration::from_secs(5));
        assert_eq!(pause(99), Duration::from_secs(5));
    }
}
