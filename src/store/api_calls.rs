//! The Open API calls of every replica, so that together they keep each app's limits:
//! a call is recorded only when the app has room for it in the second and the minute
//! before, counting every replica's calls.

use async_trait::async_trait;

use super::StoreError;
use crate::util::{Clock, UnixMs};

/// Calls an app may make in a second and in a minute.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CallLimits {
    /// In any one second.
    pub per_second: u32,
    /// In any one minute.
    pub per_minute: u32,
}

/// Whether a call was recorded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallRoom {
    /// Recorded: make it.
    Taken,
    /// No room before this instant (when the oldest call of the full window ages out).
    FullUntil(UnixMs),
}

/// The app's calls by every replica on the database.
#[async_trait]
pub trait ApiCalls: Send + Sync + 'static {
    /// Records a call of `app_id` now if the app made fewer than `limits` calls in the
    /// second and in the minute before. "Now" is read from `clock` once this recording's
    /// turn has come (the replicas record one at a time): a call is never stamped with
    /// a moment it spent waiting for the others, so another replica never counts it as
    /// older than it is.
    async fn record_call(
        &self,
        app_id: &str,
        clock: &dyn Clock,
        limits: CallLimits,
    ) -> Result<CallRoom, StoreError>;
}
