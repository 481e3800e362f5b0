//! The configuration problems a load collects, so every one is reported, not only the
//! first.

use super::ConfigError;

/// The problems found so far, in the order of the checks.
#[derive(Debug, Default)]
pub(crate) struct Problems(Vec<ConfigError>);

impl Problems {
    /// Records `e`.
    pub(super) fn push(&mut self, e: ConfigError) {
        self.0.push(e);
    }

    /// Records the problem `why` makes for `key` unless `ok`; returns `ok`, so a check
    /// that depends on this one can be skipped.
    pub(super) fn require(
        &mut self,
        ok: bool,
        key: impl Into<String>,
        why: impl FnOnce() -> String,
    ) -> bool {
        if !ok {
            self.push(ConfigError::new(key, why()));
        }
        ok
    }

    /// The problems, in order.
    pub(super) fn into_vec(self) -> Vec<ConfigError> {
        self.0
    }
}
