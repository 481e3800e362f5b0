//! `[feed]`: the batched feed of un-mentioned group messages (off unless enabled; a
//! profile's `feed_enabled` and a workspace's override it, the workspace last).

use serde::Deserialize;

/// `[feed]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct FeedConfig {
    /// Gather un-mentioned group messages into segments attached to their session.
    pub enabled: bool,
    /// A session's segment is packed once it gathered this many messages…
    pub batch_messages: usize,
    /// …or this many seconds after its first unsent one, whichever comes first.
    pub max_wait_secs: u64,
    /// Most items in one segment (the newest are taken).
    pub segment_items: usize,
    /// Most characters in one segment (senders included).
    pub segment_chars: usize,
    /// Most unread segments attached to one session; more wait, none is dropped.
    pub max_unread_segments: usize,
}

impl Default for FeedConfig {
    fn default() -> Self {
        Self {
            enabled: false,
            batch_messages: 25,
            max_wait_secs: 2400,
            segment_items: 40,
            segment_chars: 1200,
            max_unread_segments: 3,
        }
    }
}
