//! Card entities as CardKit keeps them, the card JSON rules it applies, and the checks
//! every operation on an existing entity shares (exists, no press in flight, per-card
//! frequency, size, sequence).

use std::{sync::atomic::Ordering, time::Instant};

use axum::{
    body::Bytes,
    http::{HeaderMap, StatusCode},
    response::Response,
};
use serde_json::{Value, json};

use super::{
    FakeState,
    gate::{Answer, FREQUENCY_LIMIT, Refused, RefusedCode, either, success},
    limits::{CARD_MAX_BYTES, CARDKIT_OPS_PER_SEC_PER_CARD},
};

/// A card entity.
#[derive(Debug, Clone, PartialEq)]
pub struct CardEntity {
    /// The card JSON as it is now.
    pub card: Value,
    /// The highest `sequence` accepted on it (0 before any).
    pub last_sequence: i64,
    /// The message that shows it, once sent.
    pub message_id: Option<String>,
    /// When its streaming mode was last turned on (on the fake's clock), while it is on.
    pub streaming_since: Option<Instant>,
}

/// One CardKit request, accepted or refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CardOp {
    /// The card (empty for a refused create).
    pub card_id: String,
    /// `create`, `content`, `settings` or `update`.
    pub op: &'static str,
    /// The `sequence` it carried.
    pub sequence: Option<i64>,
    /// The code it was refused with, if it was.
    pub refused: Option<i64>,
}

/// The element of `card`'s body whose `element_id` is `id`, at any depth.
pub(super) fn element_mut<'a>(value: &'a mut Value, id: &str) -> Option<&'a mut Value> {
    if value.get("element_id").and_then(Value::as_str) == Some(id) {
        return Some(value);
    }
    match value {
        Value::Object(map) => map.values_mut().find_map(|v| element_mut(v, id)),
        Value::Array(items) => items.iter_mut().find_map(|v| element_mut(v, id)),
        _ => None,
    }
}

/// The first element (depth first) of `value` that `wanted` accepts.
pub(super) fn find_element<'a>(
    value: &'a Value,
    wanted: &dyn Fn(&Value) -> bool,
) -> Option<&'a Value> {
    if value.is_object() && wanted(value) {
        return Some(value);
    }
    match value {
        Value::Object(map) => map.values().find_map(|v| find_element(v, wanted)),
        Value::Array(items) => items.iter().find_map(|v| find_element(v, wanted)),
        _ => None,
    }
}

/// A card JSON string as CardKit accepts it: JSON, `schema` 2.0, `update_multi` not false.
pub(super) fn parse_card(
    s: &FakeState,
    ep: &'static str,
    data: Option<&str>,
) -> Result<Value, Refused> {
    let refuse = |code, msg| Err(s.refuse(ep, StatusCode::BAD_REQUEST, code, msg));
    let Some(card) = data.and_then(|d| serde_json::from_str::<Value>(d).ok()) else {
        return refuse(200220, "Failed to generate card content");
    };
    if card["schema"] != "2.0" {
        return refuse(300303, "Only schema 2.0 is supported");
    }
    if card["config"]["update_multi"] == false {
        return refuse(300302, "update_multi property is false");
    }
    Ok(card)
}

impl FakeState {
    /// Storm, token, app frequency, then the `cardkit:card:write` scope.
    pub(super) fn cardkit_gate(
        &self,
        ep: &'static str,
        path: &str,
        headers: &HeaderMap,
    ) -> Result<(), Refused> {
        self.admit(ep, path, headers)?;
        if self.cardkit_refused.load(Ordering::SeqCst) {
            let msg =
                "Access denied. One of the following scopes is required: [cardkit:card:write]";
            return Err(self.refuse(ep, StatusCode::BAD_REQUEST, 99991672, msg));
        }
        Ok(())
    }

    /// Logs a CardKit request and, when it was accepted, announces it.
    pub(super) fn card_op(
        &self,
        op: &'static str,
        card_id: &str,
        sequence: Option<i64>,
        answer: Answer,
    ) -> Response {
        let response = either(answer);
        let refused = response.extensions().get::<RefusedCode>().map(|c| c.0);
        if refused.is_none() {
            self.activity.send(format!("cardkit:{op}:{card_id}")).ok();
        }
        self.card_ops.lock().expect("lock").push(CardOp {
            card_id: card_id.to_string(),
            op,
            sequence,
            refused,
        });
        response
    }

    /// Runs `apply` on entity `card_id` after the checks every operation on an existing
    /// card shares: it exists, no press on it is in flight, the per-card frequency, the
    /// body size, the sequence.
    pub(super) fn on_card(
        &self,
        ep: &'static str,
        card_id: &str,
        raw: &Bytes,
        sequence: Option<i64>,
        apply: impl FnOnce(&mut CardEntity) -> Result<(), Refused>,
    ) -> Answer {
        let mut cards = self.cards.lock().expect("lock");
        let Some(entity) = cards.get_mut(card_id) else {
            // The content docs give 200740 "The card entity does not exist".
            return Err(self.refuse(
                ep,
                StatusCode::BAD_REQUEST,
                200740,
                "The card entity does not exist",
            ));
        };
        self.check_interaction(ep, entity.message_id.as_deref())?;
        let verdict = self
            .limits
            .lock()
            .expect("lock")
            .cardkit(card_id, Instant::now());
        if let Err(reset) = verdict {
            self.violation(format!("cardkit:{card_id}"));
            let (status, limit) = (StatusCode::TOO_MANY_REQUESTS, CARDKIT_OPS_PER_SEC_PER_CARD);
            return Err(self.limited(ep, status, FREQUENCY_LIMIT, limit, reset));
        }
        if raw.len() > CARD_MAX_BYTES {
            return Err(self.refuse(
                ep,
                StatusCode::BAD_REQUEST,
                200860,
                "Card content exceeds limit.",
            ));
        }
        let Some(sequence) = sequence else {
            let msg = "Your request contains an invalid request parameter.";
            return Err(self.refuse(ep, StatusCode::BAD_REQUEST, 10002, msg));
        };
        // `sequence` must grow strictly per card across all CardKit calls; a refused
        // call does not use its number up (the docs speak only of accepted ones).
        if sequence <= entity.last_sequence {
            let msg =
                "The sequence number for operating on the card did not increment consecutively";
            return Err(self.refuse(ep, StatusCode::BAD_REQUEST, 300317, msg));
        }
        apply(entity)?;
        entity.last_sequence = sequence;
        Ok(success(json!({})))
    }
}
