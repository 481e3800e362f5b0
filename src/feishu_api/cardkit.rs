//! CardKit card entities, the way Feishu recommends streaming an answer: the card is
//! created as an entity (schema 2.0, `streaming_mode` on, the answer's markdown with an
//! `element_id`), sent by its `card_id`, its text streamed by replacing that element's
//! content with the whole text so far (Feishu types out what is new), and finished by
//! turning `streaming_mode` off and replacing the card with its final form. Streaming
//! mode closes by itself ten minutes after it was turned on; it can be turned on again
//! (the same settings call) and the text streams on. Every operation on one card
//! carries a `sequence` that must grow strictly across all of them; Feishu allows 10
//! operations per second per card. Scope `cardkit:card:write`.

use std::sync::atomic::{AtomicI64, Ordering};

use serde::Deserialize;
use serde_json::{Value, json};

use super::{FeishuClient, OpenApiError, budget::Urgency, call::Call, defuse};
use crate::util::UnixMs;

const CREATE_ENDPOINT: &str = "POST /open-apis/cardkit/v1/cards";
const CONTENT_ENDPOINT: &str =
    "PUT /open-apis/cardkit/v1/cards/{card_id}/elements/{element_id}/content";
const SETTINGS_ENDPOINT: &str = "PATCH /open-apis/cardkit/v1/cards/{card_id}/settings";
const UPDATE_ENDPOINT: &str = "PUT /open-apis/cardkit/v1/cards/{card_id}";

/// The `sequence` of one card's operations: strictly growing, even across a restart.
/// It is the milliseconds since `epoch` (a time at or before the card was created, kept
/// with the turn), or one more than the last, whichever is larger — so a process that
/// takes over a card after a restart starts above whatever the previous one sent.
#[derive(Debug)]
pub struct Sequence {
    epoch: UnixMs,
    last: AtomicI64,
}

impl Sequence {
    /// Sequences counted from `epoch`.
    pub fn from(epoch: UnixMs) -> Self {
        Self {
            epoch,
            last: AtomicI64::new(0),
        }
    }

    /// The next sequence number.
    pub fn next(&self) -> i64 {
        let elapsed = (UnixMs::now().millis() - self.epoch.millis()).max(1);
        let mut last = self.last.load(Ordering::SeqCst);
        loop {
            let next = elapsed.max(last + 1);
            match self
                .last
                .compare_exchange(last, next, Ordering::SeqCst, Ordering::SeqCst)
            {
                Ok(_) => return next,
                Err(seen) => last = seen,
            }
        }
    }
}

#[derive(Deserialize)]
struct Created {
    #[serde(default)]
    data: Option<CreatedData>,
}

#[derive(Deserialize)]
struct CreatedData {
    #[serde(default)]
    card_id: String,
}

impl FeishuClient {
    /// Creates a card entity from `card` (schema 2.0) with streaming on; its `card_id`.
    pub async fn create_card_entity(&self, card: &Value) -> Result<String, OpenApiError> {
        let mut card = card.clone();
        card["config"]["streaming_mode"] = json!(true);
        card["config"]["update_multi"] = json!(true);
        let body = json!({"type": "card_json", "data": card.to_string()});
        let call = self.cardkit(
            reqwest::Method::POST,
            CREATE_ENDPOINT,
            "/open-apis/cardkit/v1/cards".into(),
            Urgency::Required,
        );
        let created: Created = self.call(call, || Some(body.clone())).await?;
        created
            .data
            .map(|d| d.card_id)
            .filter(|id| !id.is_empty())
            .ok_or(OpenApiError::Missing {
                endpoint: CREATE_ENDPOINT,
                missing: "data.card_id",
            })
    }

    /// Shows `text` (the whole text so far) in element `element_id` of a streaming card.
    pub async fn stream_text(
        &self,
        card_id: &str,
        element_id: &str,
        text: &str,
        sequence: &Sequence,
        urgency: Urgency,
    ) -> Result<(), OpenApiError> {
        let content = defuse::mentions(text);
        let call = self.cardkit(
            reqwest::Method::PUT,
            CONTENT_ENDPOINT,
            format!("/open-apis/cardkit/v1/cards/{card_id}/elements/{element_id}/content"),
            urgency,
        );
        self.call::<serde::de::IgnoredAny>(call, || {
            Some(json!({"content": content, "sequence": sequence.next()}))
        })
        .await
        .map(|_| ())
    }

    /// Turns the card's streaming mode on (again: Feishu closes it ten minutes after it
    /// was turned on) or off (its summary stops saying it is generating).
    pub async fn set_streaming(
        &self,
        card_id: &str,
        on: bool,
        sequence: &Sequence,
        urgency: Urgency,
    ) -> Result<(), OpenApiError> {
        let settings = json!({"config": {"streaming_mode": on}}).to_string();
        let call = self.cardkit(
            reqwest::Method::PATCH,
            SETTINGS_ENDPOINT,
            format!("/open-apis/cardkit/v1/cards/{card_id}/settings"),
            urgency,
        );
        self.call::<serde::de::IgnoredAny>(call, || {
            Some(json!({"settings": settings, "sequence": sequence.next()}))
        })
        .await
        .map(|_| ())
    }

    /// Replaces the whole card with `card` (streaming off, unless `card` keeps it on).
    pub async fn replace_card_entity(
        &self,
        card_id: &str,
        card: &Value,
        sequence: &Sequence,
        urgency: Urgency,
    ) -> Result<(), OpenApiError> {
        let mut card = card.clone();
        // Streaming ends with the replacement unless the card keeps it on.
        if card["config"]["streaming_mode"] != json!(true) {
            card["config"]["streaming_mode"] = json!(false);
        }
        card["config"]["update_multi"] = json!(true);
        let data = card.to_string();
        let call = self.cardkit(
            reqwest::Method::PUT,
            UPDATE_ENDPOINT,
            format!("/open-apis/cardkit/v1/cards/{card_id}"),
            urgency,
        );
        self.call::<serde::de::IgnoredAny>(call, || {
            Some(json!({
                "card": {"type": "card_json", "data": data},
                "sequence": sequence.next(),
            }))
        })
        .await
        .map(|_| ())
    }

    fn cardkit(
        &self,
        method: reqwest::Method,
        endpoint: &'static str,
        path: String,
        urgency: Urgency,
    ) -> Call<'static> {
        Call {
            method,
            endpoint,
            url: format!("{}{path}", self.base),
            query: &[],
            urgency,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sequences_grow_strictly_and_a_later_process_starts_above() {
        let epoch = UnixMs(UnixMs::now().millis() - 5_000);
        let first = Sequence::from(epoch);
        let seen: Vec<i64> = (0..100).map(|_| first.next()).collect();
        assert!(seen.windows(2).all(|w| w[0] < w[1]), "{seen:?}");
        assert!(seen[0] >= 5_000, "{seen:?}");
        // Another process taking the card over later counts from the same epoch.
        let taken_over = Sequence::from(epoch);
        assert!(taken_over.next() >= seen[0]);
    }
}
