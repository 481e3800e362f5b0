//! What the long connection does with a complete message: persist, then acknowledge.
//! An event is acknowledged `{"code":200}` only once it is durably in the inbox (the same
//! group commit as the event URL's); when the database cannot take it by the ack
//! deadline, `{"code":500}` (Feishu pushes it again) — never 200 for an event that was
//! not stored. A redelivered event is a duplicate in the inbox and acknowledged 200. A
//! card press is answered with its toast in the acknowledgement's `data`, within its own
//! budget (see [`crate::inbox::press`]).

use std::time::Duration;

use serde_json::Value;
use tokio::time::Instant;

use super::Parts;
use crate::{
    inbox::{
        arrival::Arrival,
        press::{Answered, working_on_it},
    },
    protocol::{crypto::AesKey, verify::accept_pushed},
};

/// How a message was handled: the acknowledgement's code and `data`.
#[derive(Debug, Clone, PartialEq)]
pub struct Handled {
    /// 200, or 500 when it was not stored.
    pub code: u16,
    /// A card press's answer (the toast).
    pub data: Option<Value>,
}

impl Handled {
    fn ok(data: Option<Value>) -> Self {
        Self { code: 200, data }
    }

    fn failed() -> Self {
        Self {
            code: 500,
            data: None,
        }
    }
}

/// Handles one profile's messages.
#[derive(Clone)]
pub struct Ingest {
    parts: Parts,
    profile: String,
    aes: Option<AesKey>,
    ack_deadline: Duration,
}

impl Ingest {
    /// For `profile`'s connection, its events decrypted with `aes`.
    pub fn new(parts: Parts, profile: &str, aes: Option<AesKey>) -> Self {
        let ack_deadline = Duration::from_millis(parts.config().server.ack_deadline_ms);
        Self {
            parts,
            profile: profile.to_string(),
            aes,
            ack_deadline,
        }
    }

    /// Stores (and, for a press, answers) a complete message that arrived at `arrived`.
    pub async fn handle(&self, payload: &[u8], arrived: Instant) -> Handled {
        let profile = self.profile.as_str();
        let event = match accept_pushed(payload, self.aes.as_ref()) {
            Ok(event) => event,
            Err(e) => {
                tracing::warn!(profile, code = e.code(), reason = %e, "a pushed message is not an event the bridge can read");
                return Handled::failed();
            }
        };
        let arrival = match Arrival::of(profile, event) {
            Ok(a) => a,
            Err(why) => {
                tracing::warn!(profile, %why, "a pushed event cannot be stored");
                return Handled::failed();
            }
        };
        let deadline = arrived + self.ack_deadline;
        let (event_id, event_type) = (arrival.row.event_id.clone(), arrival.row.event_type.clone());
        if arrival.is_press {
            return match self.parts.presses.receive(arrival.row, deadline).await {
                Answered::Done(_, body) => Handled::ok(Some(body)),
                Answered::Deferred => Handled::ok(Some(working_on_it())),
                Answered::NotStored(e) => {
                    tracing::warn!(profile, %event_id, error = %e, "a pushed card press was not stored");
                    Handled::failed()
                }
                Answered::Lost => Handled::failed(),
            };
        }
        let handled = arrival.handled;
        match arrival.store(&self.parts.presses.committer, deadline).await {
            Ok(outcome) => {
                let label = Arrival::label(outcome, handled);
                tracing::info!(profile, %event_id, %event_type, outcome = label, "pushed event stored");
                Handled::ok(None)
            }
            Err(e) => {
                self.parts.metrics.store_error("insert_inbox_pushed");
                tracing::warn!(profile, %event_id, error = %e, "a pushed event was not stored; Feishu will push it again");
                Handled::failed()
            }
        }
    }
}
