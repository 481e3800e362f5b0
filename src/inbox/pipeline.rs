//! What processing an inbox event means. Today: parse it into its typed form (a payload
//! that does not parse is an error, retried and eventually failed). The routing and
//! context stages plug in here.

use crate::{protocol::events, store::InboxEvent};

/// Why an event could not be processed. Messages never contain payload content.
#[derive(Debug, thiserror::Error)]
pub enum ProcessError {
    /// The payload does not have the shape of its event type.
    #[error(transparent)]
    Parse(#[from] events::ParseError),
}

/// The processing stages.
#[derive(Debug, Default)]
pub struct Pipeline {}

impl Pipeline {
    /// A pipeline with the current stages.
    pub fn new() -> Self {
        Self {}
    }

    /// Processes one claimed event.
    pub async fn process(&self, event: &InboxEvent) -> Result<(), ProcessError> {
        let typed = events::parse(&event.event_type, &event.payload)?;
        tracing::debug!(kind = typed_kind(&typed), "event parsed");
        Ok(())
    }
}

fn typed_kind(e: &events::TypedEvent) -> &'static str {
    match e {
        events::TypedEvent::MessageReceive(_) => "message",
        events::TypedEvent::MessageRecalled(_) => "recall",
        events::TypedEvent::CardAction(_) => "card_action",
        events::TypedEvent::LegacyCardAction(_) => "legacy_card_action",
    }
}
