//! Routing and permissions: which session a message belongs to, whether it may be
//! observed, whether its sender may invoke the agent, and slash commands.
//!
//! Pure decisions over the normalized message and the profile's config; the inbox
//! pipeline applies them.

mod command;
mod policy;
mod session_key;

pub use command::{Command, HELP};
pub use policy::{Inbound, Record, Route, Sender, Verdict, may_invoke, route};
pub use session_key::Place;
