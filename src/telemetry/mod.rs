//! Logs (`tracing`) and metrics (a Prometheus registry owned by the app, never global).

mod digest;
mod feed;
mod long_connection;
mod metrics;
mod rate;

use std::io::IsTerminal;

pub use digest::DigestMetrics;
pub use feed::FeedMetrics;
pub use long_connection::LongConnMetrics;
pub use metrics::Metrics;
pub use rate::{RateMeter, WINDOW_SECS as RATE_WINDOW_SECS};
use tracing_subscriber::{EnvFilter, fmt, prelude::*};

use crate::config::LogFormat;

/// The filter used when `RUST_LOG` is unset.
pub const DEFAULT_FILTER: &str = "info,sqlx=warn,tower_http=info";

/// Installs the process-wide subscriber (binary only; tests install their own).
pub fn init_logging(format: LogFormat) {
    let filter =
        EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(DEFAULT_FILTER));
    let registry = tracing_subscriber::registry().with(filter);
    let result = match format {
        LogFormat::Json => registry
            .with(
                fmt::layer()
                    .json()
                    .with_current_span(true)
                    .with_writer(std::io::stderr),
            )
            .try_init(),
        LogFormat::Text => registry
            .with(
                fmt::layer()
                    .with_ansi(std::io::stderr().is_terminal())
                    .with_writer(std::io::stderr),
            )
            .try_init(),
    };
    if result.is_err() {
        eprintln!("logging was already initialised");
    }
}
