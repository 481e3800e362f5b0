//! `[handoff]`: one bot's answer handing work to another profile of the hub, and the
//! loop guard that bounds a chain of them.

use serde::Deserialize;

/// `[handoff]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct HandoffConfig {
    /// Answers that mention another profile's bot (or carry a structured `handoff`)
    /// queue a turn for it.
    pub enabled: bool,
    /// Most handoff turns in one chain (the person's own turn not counted).
    pub max_hops: u32,
    /// Most handoff turns started in one thread (or chat) per hour.
    pub thread_budget_per_hour: u32,
}

impl Default for HandoffConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            max_hops: 4,
            thread_budget_per_hour: 20,
        }
    }
}
