//! Turn events: what a webhook agent reports while its turn runs, one signed
//! `POST /agent/{profile}/turns/{turn_id}/events` per event (see `docs/turns.md`, "Turn
//! events"). This module holds the event kinds, their validation and bounds, and the
//! summary a reader derives from a turn's events; the store keeps them
//! ([`crate::store::TurnEventStore`]). The lengths the schema states are the ones
//! `validate` checks.

mod summary;
mod validate;

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

pub use summary::{ToolSummary, TurnEventSummary, summarize};
pub use validate::{EventError, ParsedEvent, parse};

/// The most bytes of one event's request body.
pub const MAX_EVENT_BYTES: usize = 16 * 1024;
/// The most events one turn keeps.
pub const MAX_EVENTS_PER_TURN: i64 = 2000;
/// The most bytes of event bodies one turn keeps, summed.
pub const MAX_BYTES_PER_TURN: i64 = 1024 * 1024;

/// One event, without its `seq`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum TurnEvent {
    /// Answer text.
    Text(TextEvent),
    /// A tool call's progress.
    Tool(ToolEvent),
    /// One line of what the agent is doing.
    Status(StatusEvent),
    /// A question for the user, answered by a card button or its timeout.
    Ask(AskEvent),
    /// Something went wrong (the turn itself ends through its output callback).
    Error(ErrorEvent),
}

impl TurnEvent {
    /// `text`, `tool`, `status`, `ask` or `error`.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Text(_) => "text",
            Self::Tool(_) => "tool",
            Self::Status(_) => "status",
            Self::Ask(_) => "ask",
            Self::Error(_) => "error",
        }
    }
}

/// How a text event's text adds to what came before.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum TextMode {
    /// Appended to the text so far.
    Delta,
    /// The whole text so far.
    Full,
}

/// `kind: text`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct TextEvent {
    pub text: String,
    pub mode: TextMode,
}

/// Where a tool call is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum ToolPhase {
    /// Called (status `running`).
    Start,
    /// Still going.
    Update,
    /// Done (status `ok` or `error`).
    End,
}

/// How a tool call fares.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum ToolStatus {
    Running,
    Ok,
    Error,
}

/// `kind: tool`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ToolEvent {
    /// The tool call's id: the events of one call share it.
    #[schema(min_length = 1, max_length = 128)]
    pub id: String,
    pub phase: ToolPhase,
    /// The tool's name.
    #[schema(min_length = 1, max_length = 128)]
    pub name: String,
    /// What it was called with, in a few words.
    #[serde(default)]
    #[schema(max_length = 1024)]
    pub input_summary: String,
    pub status: ToolStatus,
    /// How long it took (with `end`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_ms: Option<u64>,
}

/// `kind: status`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct StatusEvent {
    /// One line.
    #[schema(min_length = 1, max_length = 512)]
    pub text: String,
}

/// How a question is answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum AskStyle {
    /// Yes or no (or the two `options` given).
    Confirm,
    /// One of `options`.
    Select,
}

/// `kind: ask`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct AskEvent {
    /// The question's id.
    #[schema(min_length = 1, max_length = 128)]
    pub id: String,
    #[schema(min_length = 1, max_length = 4096)]
    pub prompt: String,
    pub style: AskStyle,
    /// `select`: 2 to 20 choices; `confirm`: none (`yes`/`no`) or two labels.
    #[serde(default)]
    #[schema(max_items = 20)]
    pub options: Vec<String>,
    /// How long the question stays open.
    #[schema(minimum = 1, maximum = 86400)]
    pub timeout_secs: u64,
    /// The answer when it times out: one of the options (`yes`/`no` for a plain confirm).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default: Option<String>,
}

impl AskStyle {
    /// `confirm` or `select`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Confirm => "confirm",
            Self::Select => "select",
        }
    }
}

impl AskEvent {
    /// What its timeout answers: its `default`; for a plain confirm (no options) without
    /// one, `no`; otherwise nothing (the agent is told it timed out, with no answer).
    pub fn timeout_answer(&self) -> Option<&str> {
        match (&self.default, self.style) {
            (Some(d), _) => Some(d),
            (None, AskStyle::Confirm) if self.options.is_empty() => Some("no"),
            (None, _) => None,
        }
    }
}

/// `kind: error`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ErrorEvent {
    #[schema(min_length = 1, max_length = 4096)]
    pub message: String,
}

/// The request body of `POST /agent/{profile}/turns/{turn_id}/events` (its schema).
#[derive(Debug, Serialize, ToSchema)]
pub struct TurnEventRequest {
    /// From 1, one per event of the turn.
    #[schema(minimum = 1, maximum = 9223372036854775807_i64)]
    pub seq: u64,
    #[serde(flatten)]
    pub event: TurnEvent,
}

/// Sent to observers (`App::turn_events`) when an event is stored, so a reader such as
/// a card renderer reads the turn's events again; a repeat sends nothing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TurnEventNote {
    pub turn_id: String,
    pub seq: i64,
    /// Stored for the log only.
    pub stale: bool,
}
