//! Turn writes that outlast a database failure, and answers that outlast a token outage.
//!
//! Once a turn has started, what it must record (its answer before posting it, its end
//! after) is retried until the database takes it — a full disk or a restarting server
//! only delays the turn — or until the bridge shuts down, when recovery finishes the turn
//! at the next start. What the database refuses outright is not retried. A stored
//! answer that could not be posted for want of a tenant token (the token endpoint down,
//! the cached token expired) waits the same way: it is never given up because of a
//! token fetch.

use std::{future::Future, time::Duration};

use tokio_util::sync::CancellationToken;

use crate::{feishu_api::outbound::OutboundError, store::StoreError};

/// An error that may pass: the database's alone, or a tenant token not to be had.
pub(super) trait Passing: std::fmt::Display {
    /// Retrying once the database (or the token endpoint) is back can succeed.
    fn passing(&self) -> bool;
}

impl Passing for StoreError {
    fn passing(&self) -> bool {
        StoreError::database_failed(self)
    }
}

impl Passing for OutboundError {
    fn passing(&self) -> bool {
        self.database_failed() || self.token_unavailable()
    }
}

/// The pause before retry number `failures` (from 1): 100 ms doubling, at most 5 s.
pub(super) fn pause(failures: u32) -> Duration {
    let factor = 1u32 << failures.saturating_sub(1).min(6);
    (Duration::from_millis(100) * factor).min(Duration::from_secs(5))
}

/// Runs `op` until it succeeds, fails for a reason that does not pass, or `shutdown` is
/// cancelled (the last error is returned then).
pub(super) async fn persist<T, E, Fut>(
    shutdown: &CancellationToken,
    what: &'static str,
    turn_id: &str,
    mut op: impl FnMut() -> Fut,
) -> Result<T, E>
where
    E: Passing,
    Fut: Future<Output = Result<T, E>>,
{
    let mut failures = 0u32;
    loop {
        match op().await {
            Ok(v) => {
                if failures > 0 {
                    tracing::info!(turn_id, what, failures, "the turn's write went through");
                }
                return Ok(v);
            }
            Err(e) if e.passing() => {
                failures += 1;
                if failures == 1 {
                    tracing::warn!(turn_id, what, error = %e, "the turn's write failed; retrying until it goes through");
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
