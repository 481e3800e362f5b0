//! The durable inbox: group-committed writes on the webhook path, a worker draining it.

pub mod arrival;
pub mod arrivals;
pub mod commands;
pub mod committer;
pub mod pipeline;
pub mod press;
pub mod routed;
pub mod worker;

pub use arrival::OUTCOME_HEADER;
pub use arrivals::Arrivals;
pub use committer::{CommitError, Committer};
pub use pipeline::Pipeline;
pub use worker::{Outcome, Processed, Worker};
