//! Small helpers shared across modules: the clock, session ids, and enums spelled as
//! fixed strings ([`spelled`]).

pub mod clock;
pub mod spelled;
#[cfg(test)]
pub(crate) mod testing;
mod time;

pub use clock::{Clock, ManualClock, SystemClock};
pub use time::UnixMs;

/// Now, in Unix milliseconds (as Feishu writes times; the bridge's own are [`UnixMs`]).
pub fn now_ms() -> i64 {
    UnixMs::now().millis()
}

/// Now, in Unix seconds.
pub fn now_secs() -> i64 {
    now_ms() / 1000
}

/// A fresh agent-side session id.
pub fn new_session_id() -> String {
    format!("s_{:032x}", rand::random::<u128>())
}

/// An error's text followed by each of its causes', joined with `: ` (for errors whose
/// own text leaves its causes out, such as a transport error).
pub fn with_causes(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("outer")]
    struct Outer(#[source] std::io::Error);

    #[test]
    fn causes_follow_the_error_in_order() {
        let e = Outer(std::io::Error::other("inner"));
        assert_eq!(with_causes(&e), "outer: inner");
        assert_eq!(with_causes(&std::io::Error::other("alone")), "alone");
    }
}
