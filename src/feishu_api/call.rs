//! One Open API call as the bridge makes it: room from the app's budget, the tenant
//! token, and — for a required call — retries. A rate limit waits what
//! `x-ogw-ratelimit-reset` says (a missing or zero reset backs off exponentially
//! instead of retrying at once) and is retried for as long as the limits keep refusing,
//! up to [`RATE_LIMIT_PATIENCE`]: Feishu's windows are a second and a minute, so a call
//! that waits its resets gets through, and an answer is never dropped because others
//! (another replica, another tool on the same app) spent the window. A transport
//! failure or a server error is retried [`MAX_RETRIES`] times with
//! the same body, so a send keeps its `uuid` and Feishu posts it once, and so is a
//! tenant token that could not be had (the call was not made: [`OpenApiError::Token`]);
//! an invalid token is replaced once. An intermediate call is made once, and only when the budget has
//! room to spare: the next one carries everything it would have.

use std::time::Duration;

use secrecy::ExposeSecret;
use serde::{Deserialize, de::DeserializeOwned};

use super::{
    FeishuClient, OpenApiError,
    budget::Urgency,
    codes::{self, INTERACTING, RATE_LIMITED, TOKEN_INVALID},
    defuse,
    error::decode,
};

/// Retries of one required call after transport failures and server errors.
const MAX_RETRIES: u32 = 4;
/// How long one required call keeps retrying rate limits, from the first one: ten of
/// Feishu's minute windows.
const RATE_LIMIT_PATIENCE: Duration = Duration::from_secs(600);
/// The longest wait before one retry.
const MAX_WAIT: Duration = Duration::from_secs(30);

/// What to call.
pub(super) struct Call<'a> {
    pub(super) method: reqwest::Method,
    /// Method and path template, as errors name it.
    pub(super) endpoint: &'static str,
    pub(super) url: String,
    pub(super) query: &'a [(&'a str, &'a str)],
    pub(super) urgency: Urgency,
}

/// The part of every Open API answer that says how it went.
#[derive(Deserialize)]
struct Coded {
    code: i64,
    #[serde(default)]
    msg: String,
}

/// Why one attempt did not succeed, when another may.
enum Retryable {
    /// No tenant token could be had; the call was not made.
    Token(OpenApiError),
    Transport(reqwest::Error),
    Server(u16),
    Limited {
        code: i64,
        reset: Option<Duration>,
    },
    Interacting(i64, String),
}

impl Retryable {
    fn into_error(self, endpoint: &'static str) -> OpenApiError {
        match self {
            Self::Token(e) => OpenApiError::Token(Box::new(e)),
            Self::Transport(e) => OpenApiError::transport(endpoint, e),
            Self::Server(status) => OpenApiError::Status { endpoint, status },
            Self::Limited { code, reset } => OpenApiError::RateLimited { code, reset },
            Self::Interacting(code, msg) => OpenApiError::Api { code, msg },
        }
    }

    /// What went wrong, for the log (no URL, no body).
    fn reason(&self) -> String {
        match self {
            Self::Token(e) => format!("no tenant token ({e})"),
            Self::Transport(e) if e.is_timeout() => "timed out".into(),
            Self::Transport(e) if e.is_connect() => "could not connect".into(),
            Self::Transport(_) => "the connection broke off".into(),
            Self::Server(status) => format!("HTTP {status}"),
            Self::Limited { code, .. } => format!("rate limited (code {code})"),
            Self::Interacting(code, _) => format!("card in an interaction (code {code})"),
        }
    }

    /// The pause before retry number `attempt` (from 1).
    fn wait(&self, attempt: u32) -> Duration {
        let backoff = Duration::from_millis(500) * (1 << (attempt - 1).min(5));
        let jitter = Duration::from_millis(rand::random::<u64>() % 100);
        match self {
            Self::Limited {
                reset: Some(reset), ..
            } => *reset,
            _ => backoff + jitter,
        }
        .min(MAX_WAIT)
    }
}

impl FeishuClient {
    /// Makes `call` with the body `body()` builds for each attempt (the same one, or —
    /// for CardKit — one with a fresh `sequence`), and decodes a successful answer.
    pub(super) async fn call<T: DeserializeOwned>(
        &self,
        call: Call<'_>,
        mut body: impl FnMut() -> Option<serde_json::Value>,
    ) -> Result<T, OpenApiError> {
        let endpoint = call.endpoint;
        let mut refreshed = false;
        let mut attempt = 0u32;
        let mut limited = Limited::default();
        loop {
            // The token first: fetching one takes room from the budget too, and a call
            // that had its room would otherwise wait for that fetch and go out late,
            // together with every other call that waited for it.
            let outcome = match self.tenant_token().await {
                Ok(token) => {
                    if !self.budget.take(call.urgency).await {
                        return Err(OpenApiError::Deferred);
                    }
                    let request = self.request(&call, &token, body());
                    self.attempt(request, endpoint).await?
                }
                Err(OpenApiError::NoSecret) => return Err(OpenApiError::NoSecret),
                Err(e) => Attempt::Retry(Retryable::Token(e)),
            };
            let retryable = match outcome {
                Attempt::Done(bytes) => return decode(endpoint, &bytes),
                Attempt::TokenInvalid(e) => {
                    self.forget_token();
                    if refreshed || call.urgency == Urgency::Intermediate {
                        return Err(e);
                    }
                    // The token was replaced early: once more with a fresh one.
                    refreshed = true;
                    continue;
                }
                Attempt::Retry(r) => r,
            };
            let retry = match &retryable {
                Retryable::Limited { .. } => limited.again(),
                _ => {
                    attempt += 1;
                    (attempt <= MAX_RETRIES).then_some(attempt)
                }
            };
            let Some(retry) = retry.filter(|_| call.urgency == Urgency::Required) else {
                return Err(retryable.into_error(endpoint));
            };
            let wait = retryable.wait(retry);
            tracing::warn!(
                endpoint,
                attempt = retry,
                wait_ms = wait.as_millis() as u64,
                reason = retryable.reason(),
                "Open API call failed; retrying"
            );
            tokio::time::sleep(wait).await;
        }
    }

    /// The request for one attempt of `call`.
    fn request(
        &self,
        call: &Call<'_>,
        token: &secrecy::SecretString,
        body: Option<serde_json::Value>,
    ) -> reqwest::RequestBuilder {
        let mut request = self
            .http
            .request(call.method.clone(), &call.url)
            .bearer_auth(token.expose_secret());
        if !call.query.is_empty() {
            request = request.query(call.query);
        }
        if let Some(body) = body {
            // The one way out for every text the bridge sends: no mention tag in it can
            // notify anyone, whatever built it.
            request = request.json(&defuse::body(body));
        }
        request
    }

    /// Sends one attempt and sorts out its answer.
    async fn attempt(
        &self,
        request: reqwest::RequestBuilder,
        endpoint: &'static str,
    ) -> Result<Attempt, OpenApiError> {
        let resp = match request.send().await {
            Ok(resp) => resp,
            Err(e) => return Ok(Attempt::Retry(Retryable::Transport(e))),
        };
        let status = resp.status();
        let reset = reset_after(resp.headers());
        let bytes = match resp.bytes().await {
            Ok(bytes) => bytes,
            Err(e) => return Ok(Attempt::Retry(Retryable::Transport(e))),
        };
        let coded: Coded = match decode(endpoint, &bytes) {
            Ok(c) => c,
            Err(_) if status.is_server_error() || status.as_u16() == 429 => {
                return Ok(Attempt::Retry(Retryable::Server(status.as_u16())));
            }
            Err(e) => return Err(e),
        };
        if coded.code == 0 && status.is_success() {
            return Ok(Attempt::Done(bytes.to_vec()));
        }
        if codes::is(&TOKEN_INVALID, coded.code) {
            return Ok(Attempt::TokenInvalid(OpenApiError::Api {
                code: coded.code,
                msg: coded.msg,
            }));
        }
        if status.as_u16() == 429 || codes::is(&RATE_LIMITED, coded.code) {
            return Ok(Attempt::Retry(Retryable::Limited {
                code: coded.code,
                reset,
            }));
        }
        if status.is_server_error() || coded.code == 0 {
            return Ok(Attempt::Retry(Retryable::Server(status.as_u16())));
        }
        if codes::is(&INTERACTING, coded.code) {
            // A user's press on the card is being answered: the card takes updates again
            // within seconds, so a required update retries (with the backoff of a server
            // error) rather than leave a stale card.
            let busy = Retryable::Interacting(coded.code, coded.msg);
            return Ok(Attempt::Retry(busy));
        }
        Err(OpenApiError::Api {
            code: coded.code,
            msg: coded.msg,
        })
    }
}

/// How long `x-ogw-ratelimit-reset` asks to wait; a missing, unreadable or zero one
/// says nothing (the caller backs off instead of retrying at once).
pub(super) fn reset_after(headers: &reqwest::header::HeaderMap) -> Option<Duration> {
    headers
        .get("x-ogw-ratelimit-reset")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok())
        .filter(|secs| *secs > 0)
        .map(Duration::from_secs)
}

/// The rate limits one call met.
#[derive(Default)]
struct Limited {
    /// When the first one came.
    since: Option<std::time::Instant>,
    times: u32,
}

impl Limited {
    /// Counts one more; the retry's number, unless the patience is spent.
    fn again(&mut self) -> Option<u32> {
        let since = *self.since.get_or_insert_with(std::time::Instant::now);
        self.times += 1;
        (since.elapsed() < RATE_LIMIT_PATIENCE).then_some(self.times)
    }
}

/// How one attempt went.
enum Attempt {
    /// Code 0: the answer's bytes.
    Done(Vec<u8>),
    /// The token was refused.
    TokenInvalid(OpenApiError),
    /// Another attempt may succeed.
    Retry(Retryable),
}

#[cfg(test)]
mod tests {
    use reqwest::header::{HeaderMap, HeaderValue};

    use super::*;
    use crate::feishu_api::token::tests::{Answer, open_api};

    fn reset(value: Option<&'static str>) -> Option<Duration> {
        let mut headers = HeaderMap::new();
        if let Some(v) = value {
            headers.insert("x-ogw-ratelimit-reset", HeaderValue::from_static(v));
        }
        reset_after(&headers)
    }

    #[test]
    fn a_zero_or_missing_reset_backs_off_instead_of_retrying_at_once() {
        for said in [None, Some("0"), Some("soon"), Some("")] {
            let limited = Retryable::Limited {
                code: 99991400,
                reset: reset(said),
            };
            assert!(limited.wait(1) >= Duration::from_millis(500), "{said:?}");
            assert!(limited.wait(3) >= Duration::from_secs(2), "{said:?}");
        }
        let told = Retryable::Limited {
            code: 99991400,
            reset: reset(Some("3")),
        };
        assert_eq!(
            told.wait(1),
            Duration::from_secs(3),
            "waits what Feishu said"
        );
        let far = Retryable::Limited {
            code: 99991400,
            reset: reset(Some("3600")),
        };
        assert_eq!(far.wait(1), MAX_WAIT, "never longer than the cap");
        assert!(Retryable::Server(502).wait(5) <= MAX_WAIT);
    }

    #[test]
    fn rate_limits_are_retried_until_the_patience_is_spent() {
        let mut limited = Limited::default();
        assert_eq!(
            (1..=10).map(|_| limited.again()).collect::<Vec<_>>(),
            (1..=10).map(Some).collect::<Vec<_>>(),
            "many more than MAX_RETRIES ({MAX_RETRIES})"
        );
        let long_ago = std::time::Instant::now().checked_sub(RATE_LIMIT_PATIENCE);
        if let Some(since) = long_ago {
            let mut spent = Limited {
                since: Some(since),
                times: 3,
            };
            assert_eq!(spent.again(), None, "limited for the whole patience");
        }
    }

    #[tokio::test]
    async fn a_required_call_retries_a_token_fetch_that_fails() {
        let (base, endpoint) = open_api().await;
        let client = FeishuClient::for_tests(base, "s");
        endpoint.fail_next(&[Answer::BadGateway, Answer::Busy]);
        let id = client
            .bot_open_id()
            .await
            .expect("answered after the retries");
        assert_eq!(id, "ou_bot");
        assert_eq!(endpoint.requests(), 3);
    }

    #[tokio::test]
    async fn a_call_without_a_token_says_so_and_keeps_the_cause() {
        let addr = crate::util::testing::closed_port();
        let err = FeishuClient::for_tests(format!("http://{addr}"), "s")
            .call::<serde_json::Value>(
                Call {
                    method: reqwest::Method::GET,
                    endpoint: "GET /open-apis/bot/v3/info",
                    url: format!("http://{addr}/open-apis/bot/v3/info"),
                    query: &[],
                    urgency: Urgency::Intermediate,
                },
                || None,
            )
            .await
            .expect_err("no token");
        assert!(err.token_unavailable(), "{err:?}");
        assert_eq!(
            err.code(),
            None,
            "the token endpoint's code is not the call's"
        );
        let text = err.to_string();
        assert!(text.starts_with("no tenant access token: request to the Open API failed (POST /open-apis/auth/v3/tenant_access_token/internal)"), "{text}");
        assert!(!text.contains(&addr.to_string()), "{text}");
    }
}
