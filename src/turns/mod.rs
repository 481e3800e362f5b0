//! Turns: one accepted invocation, from the request to the recorded answer.
//!
//! Selection and assembly happen when the turn runs (in its session's queue), so a turn
//! sees everything recorded before it, including the previous turn's answer. The pending
//! history is consumed when the turn is accepted (its decision recorded), up to the
//! snapshot's last event; the topic root is marked delivered only after the agent
//! answered.
//!
//! Turns are persisted (`queued → running → succeeded | failed | cancelled`): queued in
//! the routing transaction of their request, the agent's answer stored before it is
//! posted, and unfinished ones picked up after a restart (`recovery`).
//!
//! Several replicas may share one database, each running turns: a turn is owned by the
//! replica that queued it; a session's turns run one at a time, whichever replica runs
//! them (`order`); each replica renews its heartbeat, takes over the turns of replicas
//! that stopped renewing theirs, and watches for stops asked elsewhere (`duties`).
//!
//! The types call each other one way: [`Recovery`] uses the [`TurnRunner`], which
//! gathers a turn's context (`gather`), hands it to the agent, and leaves everything the
//! user is told to the `Deliverer` (`deliver`, with the streaming card of `stream`).
//! A turn's job, errors and reply target are in `job`. A webhook agent's questions are
//! answered from card buttons and timed out in `asks`; the reaction its request shows
//! while it runs is in `working`. An answer that hands work to another profile queues
//! that profile's turn in the completion's transaction (`handoff`).

pub mod asks;
pub mod buttons;
pub mod card;
mod carry;
mod deliver;
mod duties;
mod follow;
mod gather;
mod handoff;
mod job;
mod order;
mod panels;
mod persist;
pub mod queue;
mod recovery;
mod runner;
mod stream;
pub mod working;

pub use asks::AskDuty;
pub use duties::ReplicaDuties;
pub use job::{Outcome, TurnDone, TurnJob};
pub use recovery::{Recovered, Recovery};
pub use runner::{RunnerParts, TurnRunner};
pub use working::Working;
