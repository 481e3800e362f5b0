//! Routing and permissions: which session a message belongs to, whether it may be
//! observed, whether its sender may invoke the agent, and slash commands.
//!
//! Pure decisions over the normalized message and the profile's config; the inbox
//! pipeline applies them.

mod command;
mod handoff;
mod permission;
mod policy;
mod session_key;
mod verdict;

pub use command::{Command, HELP};
pub use handoff::{
    Chain, Guard, HandoffOutcome, Requester, Via, admit, mentioned_ids, plain_mentions,
};
pub use permission::{Sender, may_act_on_session, may_invoke};
pub use policy::{Inbound, Record, Route, route};
pub use session_key::Place;
pub use verdict::{Reason, Verdict};
