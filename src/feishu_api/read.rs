//! What the bridge reads through the Open API: the bot's own identity, and a message the
//! store never saw (a quoted one).

use serde::Deserialize;

use super::{
    FeishuClient, OpenApiError,
    budget::Urgency,
    call::Call,
    codes::{self, NOT_READABLE},
};

/// Reading the bot's own identity, as errors name it.
const BOT_INFO_ENDPOINT: &str = "GET /open-apis/bot/v3/info";
/// Reading a message, as errors name it.
const GET_MESSAGE_ENDPOINT: &str = "GET /open-apis/im/v1/messages/{message_id}";

#[derive(Deserialize)]
struct BotAnswer {
    #[serde(default)]
    bot: Option<BotInfo>,
}

#[derive(Deserialize)]
struct BotInfo {
    #[serde(default)]
    open_id: Option<String>,
}

/// A message read back through the Open API, normalized.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FetchedMessage {
    /// Plain text (mentions resolved, this bot's removed).
    pub text: String,
}

#[derive(Deserialize)]
struct GetAnswer {
    #[serde(default)]
    data: Option<GetData>,
}

#[derive(Deserialize)]
struct GetData {
    #[serde(default)]
    items: Vec<GetItem>,
}

#[derive(Deserialize)]
struct GetItem {
    #[serde(default)]
    msg_type: String,
    #[serde(default)]
    deleted: bool,
    #[serde(default)]
    body: Option<GetBody>,
    #[serde(default)]
    mentions: Vec<GetMention>,
}

#[derive(Deserialize)]
struct GetBody {
    #[serde(default)]
    content: String,
}

/// In GET answers a mention's `id` is a plain string (with `id_type`).
#[derive(Deserialize)]
struct GetMention {
    key: String,
    #[serde(default)]
    id: String,
    #[serde(default)]
    name: String,
}

impl FeishuClient {
    /// The bot's own open_id (`GET /open-apis/bot/v3/info`).
    pub async fn bot_open_id(&self) -> Result<String, OpenApiError> {
        let call = Call {
            method: reqwest::Method::GET,
            endpoint: BOT_INFO_ENDPOINT,
            url: format!("{}/open-apis/bot/v3/info", self.base),
            query: &[],
            urgency: Urgency::Required,
        };
        let answer: BotAnswer = self.call(call, || None).await?;
        answer
            .bot
            .and_then(|b| b.open_id)
            .filter(|id| !id.is_empty())
            .ok_or(OpenApiError::Missing {
                endpoint: BOT_INFO_ENDPOINT,
                missing: "bot.open_id",
            })
    }

    /// Reads one message (`GET /open-apis/im/v1/messages/{id}`); `None` when it was
    /// recalled, deleted, or is not visible to the bot.
    pub async fn get_message(
        &self,
        message_id: &str,
        bot_open_id: Option<&str>,
    ) -> Result<Option<FetchedMessage>, OpenApiError> {
        let call = Call {
            method: reqwest::Method::GET,
            endpoint: GET_MESSAGE_ENDPOINT,
            url: format!("{}/open-apis/im/v1/messages/{message_id}", self.base),
            query: &[
                ("user_id_type", "open_id"),
                ("card_msg_content_type", "user_card_content"),
            ],
            urgency: Urgency::Required,
        };
        let answer: GetAnswer = match self.call(call, || None).await {
            Ok(answer) => answer,
            Err(e) if e.code().is_some_and(|c| codes::is(&NOT_READABLE, c)) => return Ok(None),
            Err(e) => return Err(e),
        };
        let Some(item) = answer.data.and_then(|d| d.items.into_iter().next()) else {
            return Ok(None);
        };
        if item.deleted {
            return Ok(None);
        }
        let mentions: Vec<crate::protocol::events::Mention> = item
            .mentions
            .into_iter()
            .map(|m| crate::protocol::events::Mention {
                key: m.key,
                id: crate::protocol::events::UserIds {
                    open_id: Some(m.id),
                    union_id: None,
                    user_id: None,
                },
                name: m.name,
                mentioned_type: None,
            })
            .collect();
        let content = item.body.map(|b| b.content).unwrap_or_default();
        let normalized =
            crate::protocol::content::normalize(&item.msg_type, &content, &mentions, bot_open_id);
        Ok(Some(FetchedMessage {
            text: normalized.text,
        }))
    }
}

#[cfg(test)]
mod tests {
    use std::error::Error as _;

    use axum::{Json, Router, routing::get};
    use serde_json::{Value, json};

    use super::*;
    use crate::{
        feishu_api::client::tests::{client, open_api, token_ok},
        redact::decode::Failure,
    };

    const MARKER: &str = "MARKER-of-an-answer-9d2b";

    fn bot(answer: Value) -> Router {
        Router::new().route(
            "/open-apis/bot/v3/info",
            get(move || async move { Json(answer) }),
        )
    }

    fn message(answer: Value) -> Router {
        Router::new().route(
            "/open-apis/im/v1/messages/{id}",
            get(move || async move { Json(answer) }),
        )
    }

    #[tokio::test]
    async fn a_misshapen_answer_keeps_its_decode_failure_without_the_value() {
        let base = open_api(token_ok(), bot(json!({"code": MARKER, "msg": MARKER}))).await;
        let err = client(base).bot_open_id().await.expect_err("misshapen");
        let OpenApiError::Shape { endpoint, source } = &err else {
            panic!("not a shape failure: {err:?}");
        };
        assert_eq!(*endpoint, BOT_INFO_ENDPOINT);
        assert_eq!(
            source.to_string(),
            "wrong type at code: expected i64, found a string"
        );
        assert!(err.source().is_some_and(|s| s.is::<Failure>()));
        assert_eq!(
            err.to_string(),
            "unexpected Open API answer (GET /open-apis/bot/v3/info): \
             wrong type at code: expected i64, found a string"
        );
        assert!(!format!("{err:?}").contains(MARKER), "{err:?}");
    }

    #[tokio::test]
    async fn a_missing_open_id_is_named_with_its_endpoint() {
        let base = open_api(token_ok(), bot(json!({"code": 0, "msg": "ok", "bot": {}}))).await;
        let err = client(base).bot_open_id().await.expect_err("no open_id");
        assert_eq!(
            err.to_string(),
            "unexpected Open API answer (GET /open-apis/bot/v3/info): no bot.open_id"
        );
    }

    #[tokio::test]
    async fn deleted_or_invisible_messages_are_gone_but_an_invalid_parameter_is_a_failure() {
        for code in [230011, 230110, 230050, 230002] {
            let base = open_api(token_ok(), message(json!({"code": code, "msg": "x"}))).await;
            let read = client(base).get_message("om_1", None).await;
            assert!(matches!(read, Ok(None)), "{code}: {read:?}");
        }
        let base = open_api(token_ok(), message(json!({"code": 230001, "msg": "x"}))).await;
        let read = client(base).get_message("om_1", None).await;
        assert!(
            matches!(read, Err(OpenApiError::Api { code: 230001, .. })),
            "{read:?}"
        );
    }
}
