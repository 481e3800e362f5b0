//! Updating a card posted as a message (`PATCH /open-apis/im/v1/messages/{id}`; the
//! card declares `update_multi`). Feishu allows 5 updates per second per message and
//! 30 KB per card. The fallback when CardKit is not available to the app.

use serde_json::{Value, json};

use super::{FeishuClient, OpenApiError, budget::Urgency, call::Call};

/// Updating a message, as errors name it.
const PATCH_ENDPOINT: &str = "PATCH /open-apis/im/v1/messages/{message_id}";

impl FeishuClient {
    /// Replaces the content of a card this app sent.
    pub async fn patch_card(
        &self,
        message_id: &str,
        card: &Value,
        urgency: Urgency,
    ) -> Result<(), OpenApiError> {
        let body = json!({ "content": card.to_string() });
        let call = Call {
            method: reqwest::Method::PATCH,
            endpoint: PATCH_ENDPOINT,
            url: format!("{}/open-apis/im/v1/messages/{message_id}", self.base),
            query: &[],
            urgency,
        };
        self.call::<serde::de::IgnoredAny>(call, || Some(body.clone()))
            .await
            .map(|_| ())
    }
}
