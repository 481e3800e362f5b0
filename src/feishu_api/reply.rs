//! Sending replies through the Open API: reply in the thread of the triggering message,
//! or send to the chat; idempotent per turn (`uuid`), rate-limit aware, long answers
//! split without breaking words or code blocks.

use std::time::Duration;

use secrecy::ExposeSecret;
use serde::Deserialize;
use serde_json::json;

use super::{FeishuClient, OpenApiError, client::decode};
use crate::util::UnixMs;

/// Largest text sent in one message. Feishu allows 150 KB of text; staying far below it
/// keeps messages readable and clear of the request-size limit.
pub const MAX_MESSAGE_CHARS: usize = 8_000;

/// Retries of one send on rate limits.
const MAX_RETRIES: u32 = 4;

/// Codes that mean "slow down, then try again".
const RATE_LIMITED: [i64; 4] = [99991400, 11232, 11233, 230020];

/// Codes after which retrying cannot help.
const TERMINAL: [i64; 5] = [230011, 230002, 230001, 230025, 230071];

/// Replying to a message, as errors name it.
const REPLY_ENDPOINT: &str = "POST /open-apis/im/v1/messages/{message_id}/reply";
/// Sending to a chat, as errors name it.
const SEND_ENDPOINT: &str = "POST /open-apis/im/v1/messages";

#[derive(Deserialize)]
struct SendAnswer {
    code: i64,
    #[serde(default)]
    msg: String,
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
}

/// What a message holds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Content<'a> {
    /// Plain text.
    Text(&'a str),
    /// An interactive card (its JSON).
    Card(&'a serde_json::Value),
}

impl Content<'_> {
    /// The `msg_type` and the `content` text Feishu expects for it.
    fn encode(self) -> (&'static str, String) {
        match self {
            Self::Text(text) => ("text", json!({ "text": text }).to_string()),
            Self::Card(card) => ("interactive", card.to_string()),
        }
    }
}

impl FeishuClient {
    /// Posts `content` to `to`. `uuid` makes a retried send post at most once (Feishu
    /// keeps it for an hour). Returns the new message's id and create time.
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
            Destination::Chat(chat_id) => {
                body["receive_id"] = json!(chat_id);
                let url = format!(
                    "{}/open-apis/im/v1/messages?receive_id_type=chat_id",
                    self.base
                );
                (SEND_ENDPOINT, url)
            }
        };
        self.send_with_retries(reqwest::Method::POST, endpoint, &url, &body)
            .await
    }

    /// Sends `body` with the tenant token, retrying rate limits (honouring
    /// `x-ogw-ratelimit-reset`) and refreshing the token once on 99991663. Returns the
    /// message of the answer's `data` (an empty id when it has none). Failures name
    /// `endpoint` (method and path template), never `url`.
    pub(super) async fn send_with_retries(
        &self,
        method: reqwest::Method,
        endpoint: &'static str,
        url: &str,
        body: &serde_json::Value,
    ) -> Result<Sent, OpenApiError> {
        let mut refreshed = false;
        let mut attempt = 0;
        loop {
            let token = self.tenant_token().await?;
            let resp = self
                .http
                .request(method.clone(), url)
                .bearer_auth(token.expose_secret())
                .json(body)
                .send()
                .await
                .map_err(|e| OpenApiError::transport(endpoint, e))?;
            let status = resp.status();
            let reset = resp
                .headers()
                .get("x-ogw-ratelimit-reset")
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.trim().parse::<u64>().ok());
            let bytes = resp
                .bytes()
                .await
                .map_err(|e| OpenApiError::transport(endpoint, e))?;
            let answer: SendAnswer = decode(endpoint, &bytes)?;
            if answer.code == 0 {
                return Ok(answer.data.map_or_else(|| Sent::unstamped(""), Sent::from));
            }
            if answer.code == 99991663 && !refreshed {
                // The token expired early: drop it and ask for a new one, once.
                refreshed = true;
                self.forget_token().await;
                continue;
            }
            let limited = status.as_u16() == 429 || RATE_LIMITED.contains(&answer.code);
            if limited && attempt < MAX_RETRIES && !TERMINAL.contains(&answer.code) {
                attempt += 1;
                let wait = reset
                    .map(Duration::from_secs)
                    .unwrap_or_else(|| Duration::from_millis(250 << attempt))
                    .min(Duration::from_secs(30));
                tracing::warn!(
                    code = answer.code,
                    attempt,
                    wait_ms = wait.as_millis() as u64,
                    "rate limited by the Open API; retrying"
                );
                tokio::time::sleep(wait).await;
                continue;
            }
            return Err(OpenApiError::Api {
                code: answer.code,
                msg: answer.msg,
            });
        }
    }
}

/// Splits `text` into parts of at most `max` characters, at paragraph, line or word
/// boundaries, never inside a fenced code block unless the block alone is too long (then
/// the fence is closed and reopened around the cut).
pub fn split(text: &str, max: usize) -> Vec<String> {
    if text.chars().count() <= max {
        return vec![text.to_string()];
    }
    let mut parts = Vec::new();
    let mut current = String::new();
    let mut fence: Option<String> = None;
    for line in text.split_inclusive('\n') {
        let trimmed = line.trim_start();
        let toggles = trimmed.starts_with("```");
        let line_len = line.chars().count();
        if current.chars().count() + line_len > max && !current.is_empty() {
            if let Some(f) = &fence {
                current.push_str("```\n");
                parts.push(std::mem::take(&mut current));
                current.push_str(f);
            } else {
                parts.push(std::mem::take(&mut current));
            }
        }
        if line_len > max {
            // One very long line: cut at word boundaries.
            for word in line.split_inclusive(' ') {
                if current.chars().count() + word.chars().count() > max && !current.is_empty() {
                    parts.push(std::mem::take(&mut current));
                }
                if word.chars().count() > max {
                    let chars: Vec<char> = word.chars().collect();
                    for chunk in chars.chunks(max) {
                        parts.push(chunk.iter().collect());
                    }
                } else {
                    current.push_str(word);
                }
            }
        } else {
            current.push_str(line);
        }
        if toggles {
            fence = match fence {
                Some(_) => None,
                None => Some(format!("{}\n", trimmed.trim_end())),
            };
        }
    }
    if !current.is_empty() {
        parts.push(current);
    }
    parts
        .into_iter()
        .map(|p| p.trim_end_matches('\n').to_string())
        .filter(|p| !p.is_empty())
        .collect()
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
    fn short_text_is_one_part() {
        assert_eq!(split("hello", 10), ["hello"]);
    }

    #[test]
    fn splits_at_lines_and_words() {
        let parts = split("alpha beta\ngamma delta", 11);
        assert_eq!(parts, ["alpha beta", "gamma delta"]);
        let parts = split("one two three four", 9);
        assert!(parts.iter().all(|p| p.chars().count() <= 9), "{parts:?}");
        assert_eq!(parts.concat().replace(' ', ""), "onetwothreefour");
    }

    #[test]
    fn code_blocks_are_reopened_across_parts() {
        let text = format!("intro\n```rust\n{}```\nend", "let x = 1;\n".repeat(6));
        let parts = split(&text, 40);
        for p in &parts {
            assert_eq!(p.matches("```").count() % 2, 0, "balanced fences in {p:?}");
        }
    }
}
