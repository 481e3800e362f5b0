//! What the long connection takes from the application: where a pushed event is stored
//! and a card press answered, and the metrics and status it reports to. The long
//! connection never sees the rest of the application.

use std::sync::Arc;

use super::status::Connections;
use crate::{config::Config, inbox::press::Presses, telemetry::Metrics};

/// The parts of the application every long connection uses (cheap to clone).
#[derive(Clone)]
pub struct Parts {
    /// Stores events (with its group committer) and answers card presses; holds the
    /// configuration.
    pub presses: Presses,
    /// This instance's metrics.
    pub metrics: Metrics,
    /// What each long connection is doing, for `/status`.
    pub connections: Arc<Connections>,
}

impl Parts {
    /// The validated configuration.
    pub fn config(&self) -> &Config {
        &self.presses.config
    }
}
