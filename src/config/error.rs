//! What a configuration problem looks like: the key it is about, and what is wrong.

/// A configuration problem, naming the key it is about.
#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
#[error("{}", render(.key, .message))]
pub struct ConfigError {
    /// `profiles[1].encrypt_key`, or empty when the problem is not about one key.
    pub key: String,
    /// What is wrong.
    pub message: String,
}

fn render(key: &str, message: &str) -> String {
    if key.is_empty() {
        message.to_string()
    } else {
        format!("{key}: {message}")
    }
}

impl ConfigError {
    pub(super) fn new(key: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            key: key.into(),
            message: message.into(),
        }
    }
}
