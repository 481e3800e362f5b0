//! A small Open API client for one app.

use std::time::Duration;

use secrecy::{ExposeSecret, SecretString};
use serde::Deserialize;
use tokio::{sync::Mutex, time::Instant};

use crate::{
    config::Profile,
    redact::decode::{Failure, from_json_bytes},
};

/// Getting a tenant access token, as errors name it.
const TOKEN_ENDPOINT: &str = "POST /open-apis/auth/v3/tenant_access_token/internal";
/// Reading the bot's own identity, as errors name it.
const BOT_INFO_ENDPOINT: &str = "GET /open-apis/bot/v3/info";
/// Reading a message, as errors name it.
const GET_MESSAGE_ENDPOINT: &str = "GET /open-apis/im/v1/messages/{message_id}";

/// An Open API failure. Never carries the app secret, a token, a URL or message text:
/// an endpoint is named by its method and path template.
#[derive(Debug, thiserror::Error)]
pub enum OpenApiError {
    /// The request did not complete, or its answer broke off (kept without its URL).
    #[error("request to the Open API failed ({endpoint}): {}", crate::util::with_causes(.source))]
    Transport {
        /// The endpoint, e.g. `GET /open-apis/bot/v3/info`.
        endpoint: &'static str,
        /// What failed.
        #[source]
        source: reqwest::Error,
    },
    /// The API answered with a non-zero code.
    #[error("Open API error {code}: {msg}")]
    Api {
        /// Feishu's error code.
        code: i64,
        /// Feishu's message.
        msg: String,
    },
    /// The answer did not decode into the documented shape.
    #[error("unexpected Open API answer ({endpoint}): {source}")]
    Shape {
        endpoint: &'static str,
        /// Why it did not decode: kind and path, never a value.
        #[source]
        source: Failure,
    },
    /// The answer decoded but lacks a part it must have.
    #[error("unexpected Open API answer ({endpoint}): no {missing}")]
    Missing {
        endpoint: &'static str,
        /// What is missing, e.g. `bot.open_id`.
        missing: &'static str,
    },
    /// The profile has no app secret.
    #[error("profile has no app_secret")]
    NoSecret,
}

impl OpenApiError {
    /// A transport failure at `endpoint`, kept without the URL.
    pub(super) fn transport(endpoint: &'static str, e: reqwest::Error) -> Self {
        Self::Transport {
            endpoint,
            source: e.without_url(),
        }
    }

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
    pub async fn tenant_token(&self) -> Result<SecretString, OpenApiError> {
        let mut cached = self.token.lock().await;
        if let Some(t) = cached.as_ref().filter(|t| Instant::now() < t.refresh_at) {
            return Ok(t.value.clone());
        }
        let secret = self.app_secret.as_ref().ok_or(OpenApiError::NoSecret)?;
        let body = serde_json::json!({"app_id": self.app_id, "app_secret": secret.expose_secret()});
        let answer: TokenAnswer = self
            .http
            .post(format!(
                "{}/open-apis/auth/v3/tenant_access_token/internal",
                self.base
            ))
            .json(&body)
            .send_json(TOKEN_ENDPOINT)
            .await?;
        OpenApiError::check(answer.code, &answer.msg)?;
        let value = answer.tenant_access_token.ok_or(OpenApiError::Missing {
            endpoint: TOKEN_ENDPOINT,
            missing: "tenant_access_token",
        })?;
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
    pub async fn bot_open_id(&self) -> Result<String, OpenApiError> {
        let token = self.tenant_token().await?;
        let answer: BotAnswer = self
            .http
            .get(format!("{}/open-apis/bot/v3/info", self.base))
            .bearer_auth(token.expose_secret())
            .send_json(BOT_INFO_ENDPOINT)
            .await?;
        OpenApiError::check(answer.code, &answer.msg)?;
        answer
            .bot
            .and_then(|b| b.open_id)
            .filter(|id| !id.is_empty())
            .ok_or(OpenApiError::Missing {
                endpoint: BOT_INFO_ENDPOINT,
                missing: "bot.open_id",
            })
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
    ) -> Result<Option<FetchedMessage>, OpenApiError> {
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
            .send_json(GET_MESSAGE_ENDPOINT)
            .await?;
        if GONE.contains(&answer.code) {
            return Ok(None);
        }
        OpenApiError::check(answer.code, &answer.msg)?;
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

/// Sends a request and decodes its JSON answer, mapping failures into [`OpenApiError`]
/// named by `endpoint`, without the URL (which could carry ids).
trait SendJson {
    async fn send_json<T: serde::de::DeserializeOwned>(
        self,
        endpoint: &'static str,
    ) -> Result<T, OpenApiError>;
}

impl SendJson for reqwest::RequestBuilder {
    async fn send_json<T: serde::de::DeserializeOwned>(
        self,
        endpoint: &'static str,
    ) -> Result<T, OpenApiError> {
        let bytes = self
            .send()
            .await
            .map_err(|e| OpenApiError::transport(endpoint, e))?
            .bytes()
            .await
            .map_err(|e| OpenApiError::transport(endpoint, e))?;
        decode(endpoint, &bytes)
    }
}

/// An Open API answer decoded into `T`; a failure names `endpoint` and, by kind and
/// path, what did not fit.
pub(super) fn decode<T: serde::de::DeserializeOwned>(
    endpoint: &'static str,
    bytes: &[u8],
) -> Result<T, OpenApiError> {
    from_json_bytes(bytes).map_err(|source| OpenApiError::Shape { endpoint, source })
}

#[cfg(test)]
mod tests {
    use std::error::Error as _;

    use axum::{Json, Router, routing::post};
    use serde_json::{Value, json};

    use super::*;

    const SECRET: &str = "app-secret-never-shown-5c1e";
    const MARKER: &str = "MARKER-of-an-answer-9d2b";

    fn client(base: String) -> FeishuClient {
        FeishuClient {
            http: reqwest::Client::new(),
            base,
            app_id: "cli_test".into(),
            app_secret: Some(SecretString::from(SECRET)),
            token: Mutex::new(None),
        }
    }

    /// An Open API on 127.0.0.1:0 whose token endpoint answers `token` and whose bot
    /// info endpoint answers `bot`; returns its base URL.
    async fn open_api(token: Value, bot: Value) -> String {
        let app = Router::new()
            .route(
                "/open-apis/auth/v3/tenant_access_token/internal",
                post(move || async move { Json(token) }),
            )
            .route(
                "/open-apis/bot/v3/info",
                axum::routing::get(move || async move { Json(bot) }),
            );
        format!("http://{}", crate::util::testing::serve(app).await)
    }

    fn token_ok() -> Value {
        json!({"code": 0, "msg": "ok", "tenant_access_token": "t-1", "expire": 7200})
    }

    #[tokio::test]
    async fn a_transport_failure_keeps_its_cause_and_names_the_endpoint_not_the_url() {
        let addr = crate::util::testing::closed_port();
        let err = client(format!("http://{addr}"))
            .tenant_token()
            .await
            .expect_err("nobody listens");
        let OpenApiError::Transport { endpoint, source } = &err else {
            panic!("not a transport failure: {err:?}");
        };
        assert_eq!(*endpoint, TOKEN_ENDPOINT);
        assert!(source.is_connect(), "{source:?}");
        assert!(source.url().is_none(), "kept without its URL");
        let cause = err.source().expect("the cause is kept");
        assert!(cause.downcast_ref::<reqwest::Error>().is_some());
        let text = err.to_string();
        assert!(
            text.starts_with(
                "request to the Open API failed (POST /open-apis/auth/v3/tenant_access_token/internal): "
            ),
            "{text}"
        );
        assert!(!text.contains(&addr.to_string()), "{text}");
        // `Debug` may show the socket address the connection went to, never the URL.
        let debug = format!("{err:?}");
        assert!(!debug.contains("http://"), "{debug}");
        for shown in [text, debug] {
            assert!(!shown.contains(SECRET), "{shown}");
        }
    }

    #[tokio::test]
    async fn a_misshapen_answer_keeps_its_decode_failure_without_the_value() {
        let base = open_api(token_ok(), json!({"code": MARKER, "msg": MARKER})).await;
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
    async fn a_missing_part_is_named_with_its_endpoint() {
        let base = open_api(json!({"code": 0, "msg": "ok"}), json!({})).await;
        let err = client(base).tenant_token().await.expect_err("no token");
        assert!(
            matches!(
                err,
                OpenApiError::Missing {
                    endpoint: TOKEN_ENDPOINT,
                    missing: "tenant_access_token"
                }
            ),
            "{err:?}"
        );
        assert!(err.source().is_none());
        let base = open_api(token_ok(), json!({"code": 0, "msg": "ok", "bot": {}})).await;
        let err = client(base).bot_open_id().await.expect_err("no open_id");
        assert_eq!(
            err.to_string(),
            "unexpected Open API answer (GET /open-apis/bot/v3/info): no bot.open_id"
        );
    }
}
