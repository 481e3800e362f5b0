//! Posting messages through the Open API: a reply (in the thread of the message replied
//! to, or quoting it in the chat), or a new message in a chat; text, markdown, a card,
//! or a CardKit card entity. Idempotent by `uuid`.

use serde::Deserialize;
use serde_json::json;

use super::{FeishuClient, OpenApiError, budget::Urgency, call::Call, defuse, summary};
use crate::util::UnixMs;

/// Replying to a message, as errors name it.
const REPLY_ENDPOINT: &str = "POST /open-apis/im/v1/messages/{message_id}/reply";
/// Sending to a chat, as errors name it.
const SEND_ENDPOINT: &str = "POST /open-apis/im/v1/messages";

#[derive(Deserialize)]
struct SendAnswer {
    #[serde(default)]
    data: Option<SentMessage>,
}

#[derive(Deserialize)]
struct SentMessage {
    #[serde(default)]
    message_id: String,
    /// Milliseconds since the epoch, as a string; read as any JSON value so that an
    /// unexpected shape costs the time, never the answer of a message already posted.
    #[serde(default)]
    create_time: Option<serde_json::Value>,
}

/// A message the Open API created: its id, and when Feishu says it was sent (the time
/// the thread shows it at, so the bridge's record of its own answer sorts where Feishu
/// put it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sent {
    /// `om_…` (`rec_<n>` for a reply only recorded).
    pub message_id: String,
    /// Feishu's `create_time`; `None` when the answer had none that could be read.
    pub create_time: Option<UnixMs>,
}

impl Sent {
    /// A message known by its id alone.
    pub fn unstamped(message_id: impl Into<String>) -> Self {
        Self {
            message_id: message_id.into(),
            create_time: None,
        }
    }
}

impl From<SentMessage> for Sent {
    fn from(m: SentMessage) -> Self {
        Self {
            message_id: m.message_id,
            create_time: m.create_time.as_ref().and_then(millis),
        }
    }
}

/// A `create_time` as Feishu writes it (a string of milliseconds; a plain number is
/// taken too); anything else, or a time not after the epoch, is no time.
fn millis(v: &serde_json::Value) -> Option<UnixMs> {
    let ms = match v {
        serde_json::Value::String(s) => s.trim().parse::<i64>().ok(),
        serde_json::Value::Number(n) => n.as_i64(),
        _ => None,
    }?;
    (ms > 0).then_some(UnixMs(ms))
}

/// Where a message goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Destination<'a> {
    /// A reply to `message_id`: in its thread (`reply_in_thread`) when `in_thread`, else
    /// as a quote in the chat (a message already in a thread is answered there either
    /// way).
    Reply {
        message_id: &'a str,
        in_thread: bool,
    },
    /// A new message in the chat `chat_id`.
    Chat(&'a str),
    /// A private message to a user: an `open_id` (`ou_…`), `union_id` (`on_…`) or
    /// `user_id`.
    User(&'a str),
}

impl<'a> Destination<'a> {
    /// A reply to `reply_to` when there is one, else a new message in `chat_id`.
    pub fn of(reply_to: Option<&'a str>, chat_id: &'a str, in_thread: bool) -> Self {
        match reply_to {
            Some(message_id) => Self::Reply {
                message_id,
                in_thread,
            },
            None => Self::Chat(chat_id),
        }
    }

    /// The same place, quoting in the chat instead of replying in the thread.
    pub fn without_thread(self) -> Self {
        match self {
            Self::Reply { message_id, .. } => Self::Reply {
                message_id,
                in_thread: false,
            },
            chat => chat,
        }
    }

    /// Whether it asks for a reply in thread.
    pub fn in_thread(self) -> bool {
        matches!(
            self,
            Self::Reply {
                in_thread: true,
                ..
            }
        )
    }

    /// The message replied to, if it is a reply.
    pub fn replied(self) -> Option<&'a str> {
        match self {
            Self::Reply { message_id, .. } => Some(message_id),
            Self::Chat(_) | Self::User(_) => None,
        }
    }
}

/// What a message holds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Content<'a> {
    /// Plain text (mention tags made plain).
    Text(&'a str),
    /// Markdown, kept as markdown: a plain card with one markdown element (mention tags
    /// made plain); a text message would render almost none of it.
    Markdown(&'a str),
    /// An interactive card (its JSON, built with mention tags made plain).
    Card(&'a serde_json::Value),
    /// A CardKit card entity, by its id.
    Entity(&'a str),
    /// An uploaded image, by its `image_key`.
    Image(&'a str),
    /// An uploaded file, by its `file_key`.
    File(&'a str),
}

impl Content<'_> {
    /// The `msg_type` and the `content` text Feishu expects for it.
    pub fn encode(self) -> (&'static str, String) {
        match self {
            Self::Text(text) => (
                "text",
                json!({ "text": defuse::mentions(text) }).to_string(),
            ),
            Self::Markdown(text) => ("interactive", markdown_card(text).to_string()),
            Self::Card(card) => ("interactive", card.to_string()),
            Self::Entity(card_id) => (
                "interactive",
                json!({"type": "card", "data": {"card_id": card_id}}).to_string(),
            ),
            Self::Image(key) => ("image", json!({ "image_key": key }).to_string()),
            Self::File(key) => ("file", json!({ "file_key": key }).to_string()),
        }
    }
}

/// A card showing `text` as markdown and nothing else (a long answer's continuation),
/// previewed in the chat list by its first line.
pub fn markdown_card(text: &str) -> serde_json::Value {
    json!({
        "schema": "2.0",
        "config": {"update_multi": true, "summary": summary::of(text, "…")},
        "body": {"elements": [{"tag": "markdown", "content": defuse::mentions(text)}]},
    })
}

/// The `receive_id_type` of a new message to `to`.
fn receive_id_type(to: Destination<'_>) -> &'static str {
    match to {
        Destination::User(id) if id.starts_with("ou_") => "open_id",
        Destination::User(id) if id.starts_with("on_") => "union_id",
        Destination::User(_) => "user_id",
        _ => "chat_id",
    }
}

impl FeishuClient {
    /// Posts `content` to `to`. `uuid` makes a retried send post at most once (Feishu
    /// keeps it for an hour); every retry of this call sends the same one. Returns the
    /// new message's id and create time.
    pub async fn post(
        &self,
        to: Destination<'_>,
        content: Content<'_>,
        uuid: &str,
    ) -> Result<Sent, OpenApiError> {
        let (msg_type, content) = content.encode();
        let mut body = json!({
            "msg_type": msg_type,
            "content": content,
            "uuid": uuid,
        });
        let (endpoint, url) = match to {
            Destination::Reply {
                message_id,
                in_thread,
            } => {
                body["reply_in_thread"] = json!(in_thread);
                let url = format!("{}/open-apis/im/v1/messages/{message_id}/reply", self.base);
                (REPLY_ENDPOINT, url)
            }
            Destination::Chat(id) | Destination::User(id) => {
                body["receive_id"] = json!(id);
                let url = format!(
                    "{}/open-apis/im/v1/messages?receive_id_type={}",
                    self.base,
                    receive_id_type(to)
                );
                (SEND_ENDPOINT, url)
            }
        };
        let call = Call {
            method: reqwest::Method::POST,
            endpoint,
            url,
            query: &[],
            urgency: Urgency::Required,
        };
        let answer: SendAnswer = self.call(call, || Some(body.clone())).await?;
        Ok(answer.data.map_or_else(|| Sent::unstamped(""), Sent::from))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sent(data: serde_json::Value) -> Sent {
        serde_json::from_value::<SentMessage>(data)
            .expect("decodes")
            .into()
    }

    #[test]
    fn a_sent_message_carries_feishus_create_time_when_it_can_be_read() {
        let at = |create_time: serde_json::Value| {
            sent(json!({"message_id": "om_1", "create_time": create_time})).create_time
        };
        assert_eq!(at(json!("1700000000123")), Some(UnixMs(1_700_000_000_123)));
        assert_eq!(
            at(json!(1_700_000_000_123_i64)),
            Some(UnixMs(1_700_000_000_123))
        );
        for unreadable in [json!("soon"), json!(""), json!("0"), json!(null), json!({})] {
            assert_eq!(at(unreadable.clone()), None, "{unreadable}");
        }
        assert_eq!(sent(json!({"message_id": "om_2"})), Sent::unstamped("om_2"));
    }

    #[test]
    fn text_and_markdown_never_carry_a_mention_tag() {
        let agent = r#"done <at user_id="all">所有人</at> and <at id=all></at>"#;
        for content in [Content::Text(agent), Content::Markdown(agent)] {
            let (_, encoded) = content.encode();
            assert!(!encoded.contains("<at"), "{encoded}");
            assert!(encoded.contains("done"), "{encoded}");
        }
    }

    #[test]
    fn a_continuation_card_is_previewed_by_its_first_line() {
        let card = markdown_card("\n**第二部分** <at id=all></at>\n- 更多");
        let shown = card["config"]["summary"]["content"].as_str().unwrap_or("");
        assert_eq!(shown, "第二部分 ＜at id=all>＜/at>");
    }
}
