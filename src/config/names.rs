//! `[names]`: display names of senders and chats, read through the Open API in the
//! background and cached in the database.

use serde::Deserialize;

/// `[names]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct NamesConfig {
    /// Look names up (`false`: senders and chats are shown by their ids).
    pub enabled: bool,
    /// How long a looked-up name is used before it is looked up again, and how long a
    /// scope Feishu refused is left alone.
    pub ttl_secs: u64,
}

impl Default for NamesConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            ttl_secs: 86_400,
        }
    }
}
