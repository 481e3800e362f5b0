//! The server's client settings: how often to ping and how to reconnect.
//!
//! They arrive twice: as `data.ClientConfig` in the endpoint reply, and as the JSON
//! payload of a pong, with the keys `ReconnectCount`, `ReconnectInterval`,
//! `ReconnectNonce` and `PingInterval` (exact case) in whole seconds. The SDKs copy the
//! four values blindly, so a missing one becomes 0 and a ping loop spins; we take only
//! the values that make sense and keep the current ones for the rest:
//!
//! * `ReconnectCount`: any integer (below 0 means retry forever, 0 or more caps the
//!   attempts); missing means unchanged.
//! * `ReconnectInterval`, `PingInterval`: a positive number of seconds; 0, negative or
//!   missing means unchanged (0 would reconnect or ping in a busy loop).
//! * `ReconnectNonce`: the bound of the random wait before the first reconnect attempt;
//!   0 or more. Unlike the intervals, 0 is meaningful and taken: it turns the jitter off
//!   in every SDK, which is how a test server asks for a prompt reconnect.

use std::time::Duration;

use serde_json::Value;

/// Client settings as the server sent them; `None` where a value was missing or made
/// no sense.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ClientConfig {
    /// Reconnect attempts before giving up; below 0, forever.
    pub reconnect_count: Option<i64>,
    /// Seconds between reconnect attempts (positive).
    pub reconnect_interval_secs: Option<u64>,
    /// Bound of the random wait before the first reconnect attempt, in seconds.
    pub reconnect_nonce_secs: Option<u64>,
    /// Seconds between pings (positive).
    pub ping_interval_secs: Option<u64>,
}

impl ClientConfig {
    /// The settings in a JSON object's bytes (a pong's payload); `None` when the bytes
    /// are not a JSON object. Values of the wrong type count as missing.
    pub fn from_json(bytes: &[u8]) -> Option<Self> {
        Self::from_value(&serde_json::from_slice(bytes).ok()?)
    }

    /// The settings in a parsed JSON object (the endpoint reply's `data.ClientConfig`).
    pub fn from_value(value: &Value) -> Option<Self> {
        let object = value.as_object()?;
        let positive = |key: &str| object.get(key)?.as_u64().filter(|&s| s > 0);
        Some(Self {
            reconnect_count: object.get("ReconnectCount").and_then(Value::as_i64),
            reconnect_interval_secs: positive("ReconnectInterval"),
            reconnect_nonce_secs: object.get("ReconnectNonce").and_then(Value::as_u64),
            ping_interval_secs: positive("PingInterval"),
        })
    }

    /// `current` with every value these settings carry put in its place.
    pub fn merged_over(&self, current: &Timing) -> Timing {
        Timing {
            reconnect_count: self.reconnect_count.unwrap_or(current.reconnect_count),
            reconnect_interval: self
                .reconnect_interval_secs
                .map_or(current.reconnect_interval, Duration::from_secs),
            reconnect_nonce: self
                .reconnect_nonce_secs
                .map_or(current.reconnect_nonce, Duration::from_secs),
            ping_interval: self
                .ping_interval_secs
                .map_or(current.ping_interval, Duration::from_secs),
        }
    }
}

/// The settings a connection runs on. The default is the SDKs' own, which is also what
/// the endpoint is documented to send.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timing {
    /// Reconnect attempts before giving up; below 0, forever.
    pub reconnect_count: i64,
    /// The fixed wait between reconnect attempts.
    pub reconnect_interval: Duration,
    /// The bound of the random wait before the first reconnect attempt.
    pub reconnect_nonce: Duration,
    /// The wait between pings.
    pub ping_interval: Duration,
}

impl Default for Timing {
    fn default() -> Self {
        Self {
            reconnect_count: -1,
            reconnect_interval: Duration::from_secs(120),
            reconnect_nonce: Duration::from_secs(30),
            ping_interval: Duration::from_secs(120),
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn all_four_values_are_read_by_their_exact_keys() {
        let config = ClientConfig::from_json(
            br#"{"ReconnectCount":3,"ReconnectInterval":5,"ReconnectNonce":2,"PingInterval":7}"#,
        );
        let expected = ClientConfig {
            reconnect_count: Some(3),
            reconnect_interval_secs: Some(5),
            reconnect_nonce_secs: Some(2),
            ping_interval_secs: Some(7),
        };
        assert_eq!(config, Some(expected));
        let lower = ClientConfig::from_json(br#"{"pingInterval":7,"reconnectcount":3}"#);
        assert_eq!(
            lower,
            Some(ClientConfig::default()),
            "keys are case-sensitive"
        );
    }

    #[test]
    fn missing_zero_and_mistyped_values_are_ignored() {
        let config = ClientConfig::from_json(
            br#"{"ReconnectInterval":0,"PingInterval":"60","ReconnectNonce":-5}"#,
        )
        .expect("an object");
        assert_eq!(config, ClientConfig::default());
        let current = Timing {
            reconnect_count: 4,
            ..Timing::default()
        };
        assert_eq!(config.merged_over(&current), current, "nothing changes");
        let pings_zero = ClientConfig::from_json(br#"{"PingInterval":0,"ReconnectCount":0}"#)
            .expect("an object");
        assert_eq!(pings_zero.ping_interval_secs, None);
        assert_eq!(pings_zero.reconnect_count, Some(0), "0 attempts is a cap");
    }

    #[test]
    fn forever_and_no_jitter_are_taken() {
        let config = ClientConfig::from_value(&json!({"ReconnectCount": -1, "ReconnectNonce": 0}))
            .expect("an object");
        let current = Timing {
            reconnect_count: 2,
            ..Timing::default()
        };
        let merged = config.merged_over(&current);
        assert_eq!(merged.reconnect_count, -1);
        assert_eq!(merged.reconnect_nonce, Duration::ZERO);
        assert_eq!(merged.ping_interval, Duration::from_secs(120));
    }

    #[test]
    fn what_is_not_an_object_gives_nothing() {
        for bytes in [&b""[..], b"[]", b"120", b"{not json"] {
            assert_eq!(ClientConfig::from_json(bytes), None);
        }
    }

    #[test]
    fn the_default_is_the_sdks() {
        let t = Timing::default();
        assert_eq!(t.reconnect_count, -1);
        assert_eq!(t.reconnect_interval, Duration::from_secs(120));
        assert_eq!(t.reconnect_nonce, Duration::from_secs(30));
        assert_eq!(t.ping_interval, Duration::from_secs(120));
    }
}
