//! Interactive cards through the Open API: posted like any message
//! (`reply::Content::Card`), then updated in place (`PATCH /open-apis/im/v1/messages/{id}`;
//! the card declares `update_multi`).

use serde_json::{Value, json};

use super::{FeishuClient, OpenApiError};

/// Updating a message, as errors name it.
const PATCH_ENDPOINT: &str = "PATCH /open-apis/im/v1/messages/{message_id}";

impl FeishuClient {
    /// Replaces the content of a card this app sent.
    pub async fn patch_card(&self, message_id: &str, card: &Value) -> Result<(), OpenApiError> {
        let body = json!({ "content": card.to_string() });
        let url = format!("{}/open-apis/im/v1/messages/{message_id}", self.base);
        self.send_with_retries(reqwest::Method::PATCH, PATCH_ENDPOINT, &url, &body)
            .await
            .map(|_| ())
    }
}
