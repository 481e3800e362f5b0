//! The context engine: what goes into the thread event log, and (next) what is selected
//! from it for a turn.
//!
//! No HTTP and no SQL here: the collector turns a routed message into row values, and
//! the store writes them.

pub mod collector;
pub mod media;
pub mod prompt;
pub mod report;
pub mod selector;
