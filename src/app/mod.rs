//! The application: its shared state ([`state`]), assembled and served by [`bridge`],
//! and run until a signal ([`run`]). The HTTP layer depends on the state; the assembly
//! depends on the HTTP layer, never the other way.

pub mod bridge;
pub(crate) mod clients;
mod run;
pub mod state;

pub use bridge::Bridge;
pub use run::{run, shutdown_signal};
pub use state::{App, AppState, ProfileKeys};
