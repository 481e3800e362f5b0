//! Interactive cards through the Open API: reply with a card, then update it in place
//! (`PATCH /open-apis/im/v1/messages/{id}`; the card declares `update_multi`).

use serde_json::{Value, json};

use super::{ApiError, FeishuClient};

impl FeishuClient {
    /// Replies to `message_id` in its thread with a card; returns the card message's id.
    pub async fn reply_card(
        &self,
        message_id: &str,
        card: &Value,
        uuid: &str,
    ) -> Result<String, ApiError> {
        let body = json!({
            "msg_type": "interactive",
            "content": card.to_string(),
            "reply_in_thread": true,
            "uuid": uuid,
        });
        let url = format!("{}/open-apis/im/v1/messages/{message_id}/reply", self.base);
        self.send_with_retries(reqwest::Method::POST, &url, &body)
            .await
    }

    /// Sends a card to a chat; returns its message id.
    pub async fn send_card(
        &self,
        chat_id: &str,
        card: &Value,
        uuid: &str,
    ) -> Result<String, ApiError> {
        let body = json!({
            "receive_id": chat_id,
            "msg_type": "interactive",
            "content": card.to_string(),
            "uuid": uuid,
        });
        let url = format!(
            "{}/open-apis/im/v1/messages?receive_id_type=chat_id",
            self.base
        );
        self.send_with_retries(reqwest::Method::POST, &url, &body)
            .await
    }

    /// Replaces the content of a card this app sent.
    pub async fn patch_card(&self, message_id: &str, card: &Value) -> Result<(), ApiError> {
        let body = json!({ "content": card.to_string() });
        let url = format!("{}/open-apis/im/v1/messages/{message_id}", self.base);
        self.send_with_retries(reqwest::Method::PATCH, &url, &body)
            .await
            .map(|_| ())
    }
}
