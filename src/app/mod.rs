//! The application: the shared state ([`crate::state`]) assembled and served by
//! [`bridge`], and run until a signal ([`run`]). The HTTP layer and the long connection
//! depend on parts of the state; the assembly depends on them, never the other way.

pub mod bridge;
mod run;

pub use bridge::Bridge;
pub use run::{run, shutdown_signal};
