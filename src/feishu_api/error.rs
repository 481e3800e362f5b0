//! What an Open API failure says, and how an answer is decoded.

use std::time::Duration;

use crate::redact::decode::{Failure, from_json_bytes};

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

/// An Open API answer decoded into `T`; a failure names `endpoint` and, by kind and
/// path, what did not fit.
pub(super) fn decode<T: serde::de::DeserializeOwned>(
    endpoint: &'static str,
    bytes: &[u8],
) -> Result<T, OpenApiError> {
    from_json_bytes(bytes).map_err(|source| OpenApiError::Shape { endpoint, source })
}
