//! What a webhook agent reports while its turn runs: one event per `seq`, kept in the
//! order of `seq` (see `docs/turns.md`, "Turn events").

use async_trait::async_trait;

use super::{NewAsk, StoreError};
use crate::util::UnixMs;

/// An event to store, already validated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewTurnEvent<'a> {
    pub turn_id: &'a str,
    /// The profile the event was signed for: a turn of another profile is unknown.
    pub profile: &'a str,
    /// From 1.
    pub seq: i64,
    /// `text`, `tool`, `status`, `ask` or `error`.
    pub kind: &'a str,
    /// The event as JSON, without `seq` (compared byte for byte with a repeat).
    pub body: &'a str,
    pub now: UnixMs,
    /// The question an `ask` event asks, created with it.
    pub ask: Option<NewAsk<'a>>,
}

/// The bounds of one turn's events.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TurnEventLimits {
    /// At most this many events.
    pub max_events: i64,
    /// At most this many bytes of event bodies, summed.
    pub max_bytes: i64,
}

/// What became of an event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AppendOutcome {
    /// Stored; `stale` when a newer seq was stored before it.
    Stored { stale: bool },
    /// The same event under the same seq was stored before; nothing new is stored.
    Duplicate { stale: bool },
    /// Another event was stored under this seq.
    Conflict,
    /// An `ask` whose id was asked before in the turn (under another seq).
    AskConflict,
    /// No turn of this profile under this id.
    UnknownTurn,
    /// The turn is still queued: it was not handed to the agent yet.
    NotStarted,
    /// The turn has ended.
    Ended,
    /// The turn's count or byte bound would be passed.
    Full,
}

/// A stored event.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct TurnEventRow {
    pub turn_id: String,
    pub seq: i64,
    pub kind: String,
    /// The event as JSON, without `seq`.
    pub body: String,
    /// Stored after a newer seq: in the log, not for display.
    pub stale: bool,
    pub received_at: UnixMs,
}

/// Turn events.
#[async_trait]
pub trait TurnEventStore: Send + Sync + 'static {
    /// Stores an event of a running turn, in one transaction that holds the turn's row,
    /// with the ask of an `ask` event: a repeat, a conflict, an ask id used before, an
    /// unknown, queued or ended turn, or a passed bound stores nothing.
    async fn append_turn_event(
        &self,
        e: &NewTurnEvent<'_>,
        limits: TurnEventLimits,
    ) -> Result<AppendOutcome, StoreError>;
    /// A turn's events in seq order.
    async fn turn_events(&self, turn_id: &str) -> Result<Vec<TurnEventRow>, StoreError>;
}
