//! Small helpers shared across modules: the clock, session ids, and enums spelled as
//! fixed strings ([`spelled`]).

pub mod spelled;

use std::time::{SystemTime, UNIX_EPOCH};

/// Now, in Unix milliseconds.
pub fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or_default()
}

/// Now, in Unix seconds.
pub fn now_secs() -> i64 {
    now_ms() / 1000
}

/// A fresh agent-side session id.
pub fn new_session_id() -> String {
    format!("s_{:032x}", rand::random::<u128>())
}
