//! Turns: one accepted invocation, from the request to the recorded answer.
//!
//! Selection and assembly happen when the turn runs (in its session's queue), so a turn
//! sees everything recorded before it, including the previous turn's answer. The pending
//! history is consumed when the turn is accepted (its decision recorded), up to the
//! snapshot's last event; the topic root is marked delivered only after the agent
//! answered.

mod context;
mod runner;

pub use runner::{TurnDone, TurnJob, TurnRunner};
