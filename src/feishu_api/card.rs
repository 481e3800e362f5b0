//! Interactive cards through the Open API: reply with a card, then update it in place
//! (`PATCH /open-apis/im/v1/messages/{id}`; the card declares `update_multi`).

use serde_json::{Value, json};

use super::{FeishuClient, OpenApiError};

/// Updating a message, as errors name it.
const PATCH_ENDPOINT: &str = "PATCH /open-apis/im/v1/messages/{message_id}";

impl FeishuClient {
    /// Replies to `message_id` with a card (in its thread when `in_thread`); returns the
    /// card message's id.
    pub async fn reply_card(
        &self,
        message_id: &str,
        card: &Value,
        uuid: &str,
        in_thread: bool,
    ) -> Result<String, OpenApiError> {
        self.reply(message_id, "interactive", card.to_string(), uuid, in_thread)
            .await
    }

    /// Sends a card to a chat; returns its message id.
    pub async fn send_card(
        &self,
        chat_id: &str,
        card: &Value,
        uuid: &str,
    ) -> Result<String, OpenApiError> {
        self.send(chat_id, "interactive", card.to_string(), uuid)
            .await
    }

    /// Replaces the content of a card this app sent.
    pub async fn patch_card(&self, message_id: &str, card: &Value) -> Result<(), OpenApiError> {
        let body = json!({ "content": card.to_string() });
        let url = format!("{}/open-apis/im/v1/messages/{message_id}", self.base);
        self.send_with_retries(reqwest::Method::PATCH, PATCH_ENDPOINT, &url, &body)
            .await
            .map(|_| ())
    }
}
