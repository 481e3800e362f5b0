//! A small Open API client for one app: its tenant access token (cached, never one
//! request per message: see `token`), the app's call budget, and what an Open API
//! failure says.

use std::{sync::Arc, time::Duration};

use secrecy::{ExposeSecret, SecretString};

use super::{
    budget::Budget,
    token::{CachedToken, Refresh},
};
use crate::{
    config::Profile,
    redact::decode::{Failure, from_json_bytes},
    util::{Clock, SystemClock},
};

/// Getting a tenant access token, as errors name it.
pub(super) const TOKEN_ENDPOINT: &str = "POST /open-apis/auth/v3/tenant_access_token/internal";

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
    /// The answer was an HTTP error without an Open API body (a gateway's 5xx).
    #[error("the Open API answered HTTP {status} ({endpoint})")]
    Status {
        endpoint: &'static str,
        /// The HTTP status.
        status: u16,
    },
    /// The API answered with a non-zero code.
    #[error("Open API error {code}: {msg}")]
    Api {
        /// Feishu's error code.
        code: i64,
        /// Feishu's message.
        msg: String,
    },
    /// Rate limited, and not retried (an intermediate update, or retries used up).
    #[error("rate limited by the Open API (code {code})")]
    RateLimited {
        /// Feishu's code (99991400, 230020, …).
        code: i64,
        /// How long Feishu asked to wait (`x-ogw-ratelimit-reset`), when it said.
        reset: Option<Duration>,
    },
    /// An intermediate update the app's budget had no spare room for: nothing was sent.
    #[error("deferred: the app's Open API budget had no room to spare")]
    Deferred,
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
    /// The call was not made: no tenant access token could be had (the token endpoint
    /// failed and the cached token, if any, has expired).
    #[error("no tenant access token: {0}")]
    Token(#[source] Box<OpenApiError>),
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

    /// Whether the call was not made for want of a tenant token: worth making again once
    /// the token endpoint answers.
    pub fn token_unavailable(&self) -> bool {
        matches!(self, Self::Token(_))
    }

    /// Feishu's code, when the API answered with one (a token endpoint's code is not the
    /// call's: [`Self::Token`] has none).
    pub fn code(&self) -> Option<i64> {
        match self {
            Self::Api { code, .. } | Self::RateLimited { code, .. } => Some(*code),
            _ => None,
        }
    }

    /// Whether the code is one of `set` (see `codes`).
    pub fn is(&self, set: &[i64]) -> bool {
        self.code().is_some_and(|c| set.contains(&c))
    }
}

/// One app's client.
pub struct FeishuClient {
    pub(super) http: reqwest::Client,
    pub(super) base: String,
    pub(super) app_id: String,
    pub(super) app_secret: Option<SecretString>,
    pub(super) token: std::sync::Mutex<Option<CachedToken>>,
    /// Held by the one caller fetching a token.
    pub(super) refresh: tokio::sync::Mutex<Refresh>,
    /// Shared by every client of the same app.
    pub(super) budget: Arc<Budget>,
    /// Where token lifetimes are read.
    pub(super) clock: Arc<dyn Clock>,
}

impl std::fmt::Debug for FeishuClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "FeishuClient({}, {})", self.base, self.app_id)
    }
}

impl FeishuClient {
    /// A client for the profile's app, spending from `budget` (the app's: profiles of
    /// one app share it).
    pub fn new(http: reqwest::Client, profile: &Profile, budget: Arc<Budget>) -> Self {
        Self {
            http,
            base: profile.api_base.trim_end_matches('/').to_string(),
            app_id: profile.app_id.clone(),
            app_secret: profile
                .app_secret
                .clone()
                .filter(|s| !s.expose_secret().is_empty()),
            token: std::sync::Mutex::new(None),
            refresh: tokio::sync::Mutex::default(),
            budget,
            clock: Arc::new(SystemClock),
        }
    }

    /// The client reading token lifetimes from `clock` (the app's).
    pub fn with_clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }

    /// Whether the client has a secret to send with.
    pub fn can_send(&self) -> bool {
        self.app_secret.is_some()
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
pub(super) mod tests {
    use std::error::Error as _;

    use axum::{Json, Router, routing::post};
    use serde_json::{Value, json};

    use super::*;

    pub(crate) const SECRET: &str = "app-secret-never-shown-5c1e";

    /// A client of app `cli_test` against `base`.
    pub(crate) fn client(base: String) -> FeishuClient {
        FeishuClient {
            http: reqwest::Client::new(),
            base,
            app_id: "cli_test".into(),
            app_secret: Some(SecretString::from(SECRET)),
            token: std::sync::Mutex::new(None),
            refresh: tokio::sync::Mutex::default(),
            budget: Arc::default(),
            clock: Arc::new(SystemClock),
        }
    }

    /// An Open API on 127.0.0.1:0 whose token endpoint answers `token`, plus `more`
    /// routes; returns its base URL.
    pub(crate) async fn open_api(token: Value, more: Router) -> String {
        let app = Router::new()
            .route(
                "/open-apis/auth/v3/tenant_access_token/internal",
                post(move || async move { Json(token) }),
            )
            .merge(more);
        format!("http://{}", crate::util::testing::serve(app).await)
    }

    pub(crate) fn token_ok() -> Value {
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
    async fn a_missing_token_is_named_with_its_endpoint() {
        let base = open_api(json!({"code": 0, "msg": "ok"}), Router::new()).await;
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
    }
}
