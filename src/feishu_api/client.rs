//! A small Open API client for one app.

use std::time::Duration;

use secrecy::{ExposeSecret, SecretString};
use serde::Deserialize;
use tokio::{sync::Mutex, time::Instant};

use crate::config::Profile;

/// An Open API failure. Never carries the app secret or a token.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// The request did not complete.
    #[error("request to the Open API failed: {0}")]
    Transport(String),
    /// The API answered with a non-zero code.
    #[error("Open API error {code}: {msg}")]
    Api {
        /// Feishu's error code.
        code: i64,
        /// Feishu's message.
        msg: String,
    },
    /// The answer did not have the documented shape.
    #[error("unexpected Open API answer: {0}")]
    Shape(String),
    /// The profile has no app secret.
    #[error("profile has no app_secret")]
    NoSecret,
}

impl ApiError {
    /// `Err` for a non-zero `code` of an Open API answer.
    pub(super) fn check(code: i64, msg: &str) -> Result<(), Self> {
        if code == 0 {
            return Ok(());
        }
        Err(Self::Api {
            code,
            msg: msg.to_string(),
        })
    }
}

struct CachedToken {
    value: SecretString,
    refresh_at: Instant,
}

/// One app's client.
pub struct FeishuClient {
    pub(super) http: reqwest::Client,
    pub(super) base: String,
    app_id: String,
    app_secret: Option<SecretString>,
    token: Mutex<Option<CachedToken>>,
}

impl std::fmt::Debug for FeishuClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "FeishuClient({}, {})", self.base, self.app_id)
    }
}

#[derive(Deserialize)]
struct TokenAnswer {
    code: i64,
    #[serde(default)]
    msg: String,
    #[serde(default)]
    tenant_access_token: Option<String>,
    #[serde(default)]
    expire: Option<u64>,
}

#[derive(Deserialize)]
struct BotAnswer {
    code: i64,
    #[serde(default)]
    msg: String,
    #[serde(default)]
    bot: Option<BotInfo>,
}

#[derive(Deserialize)]
struct BotInfo {
    #[serde(default)]
    open_id: Option<String>,
}

impl FeishuClient {
    /// A client for the profile's app.
    pub fn new(http: reqwest::Client, profile: &Profile) -> Self {
        Self {
            http,
            base: profile.api_base.trim_end_matches('/').to_string(),
            app_id: profile.app_id.clone(),
            app_secret: profile
                .app_secret
                .clone()
                .filter(|s| !s.expose_secret().is_empty()),
            token: Mutex::new(None),
        }
    }

    /// The tenant access token, from the cache while it has more than a tenth of its
    /// life (at most ten minutes) left.
    pub async fn tenant_token(&self) -> Result<SecretString, ApiError> {
        let mut cached = self.token.lock().await;
        if let Some(t) = cached.as_ref().filter(|t| Instant::now() < t.refresh_at) {
            return Ok(t.value.clone());
        }
        let secret = self.app_secret.as_ref().ok_or(ApiError::NoSecret)?;
        let body = serde_json::json!({"app_id": self.app_id, "app_secret": secret.expose_secret()});
        let answer: TokenAnswer = self
            .http
            .post(format!(
                "{}/open-apis/auth/v3/tenant_access_token/internal",
                self.base
            ))
            .json(&body)
            .send_json()
            .await?;
        ApiError::check(answer.code, &answer.msg)?;
        let value = answer
            .tenant_access_token
            .ok_or_else(|| ApiError::Shape("no tenant_access_token".into()))?;
        let life = answer.expire.unwrap_or(7200);
        let margin = (life / 10).min(600);
        let token = SecretString::from(value);
        *cached = Some(CachedToken {
            value: token.clone(),
            refresh_at: Instant::now() + Duration::from_secs(life.saturating_sub(margin)),
        });
        Ok(token)
    }

    /// Whether the client has a secret to send with.
    pub fn can_send(&self) -> bool {
        self.app_secret.is_some()
    }

    /// Drops the cached token (after the API called it invalid).
    pub(super) async fn forget_token(&self) {
        *self.token.lock().await = None;
    }

    /// The bot's own open_id (`GET /open-apis/bot/v3/info`).
    pub async fn bot_open_id(&self) -> Result<String, ApiError> {
        let token = self.tenant_token().await?;
        let answer: BotAnswer = self
            .http
            .get(format!("{}/open-apis/bot/v3/info", self.base))
            .bearer_auth(token.expose_secret())
            .send_json()
            .await?;
        ApiError::check(answer.code, &answer.msg)?;
        answer
            .bot
            .and_then(|b| b.open_id)
            .filter(|id| !id.is_empty())
            .ok_or_else(|| ApiError::Shape("no bot.open_id".into()))
    }
}

/// A message read back through the Open API, normalized.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FetchedMessage {
    /// Plain text (mentions resolved, this bot's removed).
    pub text: String,
}

#[derive(Deserialize)]
struct GetAnswer {
    code: i64,
    #[serde(default)]
    msg: String,
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

/// Codes that mean "that message is not there for you" rather than a failure.
const GONE: [i64; 3] = [230011, 230002, 230001];

impl FeishuClient {
    /// Reads one message (`GET /open-apis/im/v1/messages/{id}`); `None` when it was
    /// recalled, deleted, or is not visible to the bot.
    pub async fn get_message(
        &self,
        message_id: &str,
        bot_open_id: Option<&str>,
    ) -> Result<Option<FetchedMessage>, ApiError> {
        let token = self.tenant_token().await?;
        let answer: GetAnswer = self
            .http
            .get(format!(
                "{}/open-apis/im/v1/messages/{message_id}",
                self.base
            ))
            .query(&[
                ("user_id_type", "open_id"),
                ("card_msg_content_type", "user_card_content"),
            ])
            .bearer_auth(token.expose_secret())
            .send_json()
            .await?;
        if GONE.contains(&answer.code) {
            return Ok(None);
        }
        ApiError::check(answer.code, &answer.msg)?;
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

/// Sends a request and decodes its JSON answer, mapping failures without the URL (which
/// could carry ids) into [`ApiError`].
trait SendJson {
    async fn send_json<T: serde::de::DeserializeOwned>(self) -> Result<T, ApiError>;
}

impl SendJson for reqwest::RequestBuilder {
    async fn send_json<T: serde::de::DeserializeOwned>(self) -> Result<T, ApiError> {
        self.send()
            .await
            .map_err(|e| ApiError::Transport(e.without_url().to_string()))?
            .json()
            .await
            .map_err(|e| ApiError::Shape(e.without_url().to_string()))
    }
}
