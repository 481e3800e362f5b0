//! The tenant access token of one app's client: cached (never one request per message)
//! and replaced a while before it expires.
//!
//! Feishu keeps a token valid until its own expiry while it issues the next one, so a
//! refresh that fails — the token endpoint unreachable, timing out, answering a 5xx page
//! or a non-zero code — keeps using the cached token until then, trying again every
//! [`REFRESH_RETRY`]. Only one caller refreshes at a time; the others go on with the
//! token at hand while it lasts. A call that finds no token at all retries the fetch
//! with its own backoff (see `call`).

use std::time::Duration;

use secrecy::{ExposeSecret, SecretString};
use serde::Deserialize;

use super::{
    FeishuClient, OpenApiError,
    budget::Urgency,
    client::{TOKEN_ENDPOINT, decode},
};
use crate::util::UnixMs;

/// How long after a failed refresh the next one is tried, while the cached token lasts.
pub const REFRESH_RETRY: Duration = Duration::from_secs(5);

/// How long before its expiry a token is replaced: a tenth of its life, at most ten
/// minutes (Feishu issues a new one once less than thirty are left).
fn refresh_margin(life: Duration) -> Duration {
    (life / 10).min(Duration::from_secs(600))
}

#[derive(Clone)]
pub(super) struct CachedToken {
    value: SecretString,
    /// When to replace it.
    refresh_at: UnixMs,
    /// When Feishu stops taking it.
    expires_at: UnixMs,
}

/// The refresher's own state.
#[derive(Default)]
pub(super) struct Refresh {
    /// After a failed refresh: not before this.
    next_try: Option<UnixMs>,
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

impl FeishuClient {
    /// The cached token, if `keep` says it is still good.
    fn cached(&self, keep: impl Fn(&CachedToken) -> bool) -> Option<SecretString> {
        let cached = self.token.lock().unwrap_or_else(|e| e.into_inner());
        cached.as_ref().filter(|t| keep(t)).map(|t| t.value.clone())
    }

    /// The tenant access token: the cached one until it is due for replacement; then a
    /// fresh one, or — while the refresh fails — the cached one until it expires.
    pub async fn tenant_token(&self) -> Result<SecretString, OpenApiError> {
        let fresh = |now: UnixMs| move |t: &CachedToken| now < t.refresh_at;
        let valid = |now: UnixMs| move |t: &CachedToken| now < t.expires_at;
        if let Some(token) = self.cached(fresh(self.clock.now())) {
            return Ok(token);
        }
        let mut refresh = match self.refresh.try_lock() {
            Ok(refresh) => refresh,
            // Someone else is fetching: the token at hand serves while it lasts.
            Err(_) => match self.cached(valid(self.clock.now())) {
                Some(token) => return Ok(token),
                None => self.refresh.lock().await,
            },
        };
        let now = self.clock.now();
        if let Some(token) = self.cached(fresh(now)) {
            return Ok(token);
        }
        let current = self.cached(valid(now));
        if let Some(token) = &current
            && refresh.next_try.is_some_and(|at| now < at)
        {
            return Ok(token.clone());
        }
        match self.fetch_token().await {
            Ok(token) => {
                refresh.next_try = None;
                Ok(token)
            }
            Err(e) => match self.cached(valid(self.clock.now())) {
                Some(token) => {
                    refresh.next_try = Some(self.clock.now() + REFRESH_RETRY);
                    tracing::warn!(app_id = %self.app_id, error = %e, "tenant token refresh failed; the current token serves until it expires");
                    Ok(token)
                }
                None => Err(e),
            },
        }
    }

    /// Fetches a token and caches it.
    async fn fetch_token(&self) -> Result<SecretString, OpenApiError> {
        let secret = self.app_secret.as_ref().ok_or(OpenApiError::NoSecret)?;
        let body = serde_json::json!({"app_id": self.app_id, "app_secret": secret.expose_secret()});
        self.budget.take(Urgency::Required).await;
        // Feishu counts the token's life from before it answers.
        let asked = self.clock.now();
        let resp = self
            .http
            .post(format!(
                "{}/open-apis/auth/v3/tenant_access_token/internal",
                self.base
            ))
            .json(&body)
            .send()
            .await
            .map_err(|e| OpenApiError::transport(TOKEN_ENDPOINT, e))?;
        let status = resp.status();
        let bytes = resp
            .bytes()
            .await
            .map_err(|e| OpenApiError::transport(TOKEN_ENDPOINT, e))?;
        let answer: TokenAnswer = match decode(TOKEN_ENDPOINT, &bytes) {
            Ok(answer) => answer,
            // A gateway's error page says no more than its status.
            Err(_) if !status.is_success() => {
                return Err(OpenApiError::Status {
                    endpoint: TOKEN_ENDPOINT,
                    status: status.as_u16(),
                });
            }
            Err(e) => return Err(e),
        };
        OpenApiError::check(answer.code, &answer.msg)?;
        let value = answer.tenant_access_token.ok_or(OpenApiError::Missing {
            endpoint: TOKEN_ENDPOINT,
            missing: "tenant_access_token",
        })?;
        let life = Duration::from_secs(answer.expire.unwrap_or(7200));
        let token = SecretString::from(value);
        let expires_at = asked + life;
        *self.token.lock().unwrap_or_else(|e| e.into_inner()) = Some(CachedToken {
            value: token.clone(),
            refresh_at: expires_at - refresh_margin(life),
            expires_at,
        });
        Ok(token)
    }

    /// Drops the cached token (after the API called it invalid).
    pub(super) fn forget_token(&self) {
        *self.token.lock().unwrap_or_else(|e| e.into_inner()) = None;
    }
}

#[cfg(test)]
mod tests {
    use std::{
        collections::VecDeque,
        sync::{
            Arc, Mutex,
            atomic::{AtomicUsize, Ordering},
        },
    };

    use axum::{
        Json, Router,
        http::StatusCode,
        response::{IntoResponse, Response},
        routing::{get, post},
    };
    use serde_json::json;

    use super::*;
    use crate::{
        feishu_api::client::tests::client,
        util::{ManualClock, testing::serve},
    };

    /// How the fake token endpoint answers one request.
    #[derive(Clone, Copy)]
    enum Answer {
        Token,
        /// A gateway's page.
        BadGateway,
        /// A non-zero code ("system busy").
        Busy,
    }

    /// A token endpoint answering from `plan` (then tokens), counting requests; each
    /// token it issues is `t-<request number>`, for two hours.
    struct TokenEndpoint {
        plan: Mutex<VecDeque<Answer>>,
        requests: AtomicUsize,
    }

    impl TokenEndpoint {
        fn answer(&self) -> Response {
            let n = self.requests.fetch_add(1, Ordering::SeqCst) + 1;
            let next = self.plan.lock().expect("lock").pop_front();
            match next.unwrap_or(Answer::Token) {
                Answer::Token => Json(json!({"code": 0, "msg": "ok",
                    "tenant_access_token": format!("t-{n}"), "expire": 7200}))
                .into_response(),
                Answer::BadGateway => (StatusCode::BAD_GATEWAY, "<html>502</html>").into_response(),
                Answer::Busy => Json(json!({"code": 1, "msg": "system busy"})).into_response(),
            }
        }

        fn requests(&self) -> usize {
            self.requests.load(Ordering::SeqCst)
        }

        fn fail_next(&self, answers: &[Answer]) {
            self.plan.lock().expect("lock").extend(answers);
        }
    }

    /// The endpoint, plus a bot info route that wants token `t-<n>` for any `n`.
    async fn open_api() -> (String, Arc<TokenEndpoint>) {
        let endpoint = Arc::new(TokenEndpoint {
            plan: Mutex::default(),
            requests: AtomicUsize::default(),
        });
        let e = endpoint.clone();
        let app = Router::new()
            .route(
                "/open-apis/auth/v3/tenant_access_token/internal",
                post(move || async move { e.answer() }),
            )
            .route(
                "/open-apis/bot/v3/info",
                get(|| async {
                    Json(json!({"code": 0, "msg": "ok", "bot": {"open_id": "ou_bot"}}))
                }),
            );
        (format!("http://{}", serve(app).await), endpoint)
    }

    fn shown(token: SecretString) -> String {
        token.expose_secret().to_string()
    }

    #[tokio::test]
    async fn a_failed_refresh_serves_the_cached_token_until_it_expires() {
        let (base, endpoint) = open_api().await;
        let clock = Arc::new(ManualClock::at(UnixMs(1_000_000)));
        let client = client(base).with_clock(clock.clone());
        let token = client.tenant_token().await.expect("a token");
        assert_eq!((shown(token), endpoint.requests()), ("t-1".into(), 1));

        // Cached until a tenth of its life is left.
        clock.advance(Duration::from_secs(6_000));
        assert_eq!(shown(client.tenant_token().await.expect("cached")), "t-1");
        assert_eq!(endpoint.requests(), 1);

        // Due for replacement; the refresh fails: the cached token serves, and the
        // refresh is tried again only after REFRESH_RETRY.
        clock.advance(Duration::from_secs(700));
        endpoint.fail_next(&[Answer::BadGateway, Answer::Busy, Answer::BadGateway]);
        assert_eq!(shown(client.tenant_token().await.expect("served")), "t-1");
        assert_eq!(shown(client.tenant_token().await.expect("served")), "t-1");
        assert_eq!(endpoint.requests(), 2, "no second try at once");
        clock.advance(REFRESH_RETRY);
        assert_eq!(shown(client.tenant_token().await.expect("served")), "t-1");
        assert_eq!(endpoint.requests(), 3, "tried again");

        // Past its expiry it is not used: the failure is the caller's.
        clock.advance(Duration::from_secs(600));
        let err = client.tenant_token().await.expect_err("no token");
        assert!(
            matches!(err, OpenApiError::Status { status: 502, .. }),
            "{err:?}"
        );
        assert_eq!(endpoint.requests(), 4);

        // The endpoint is back: a new token.
        assert_eq!(shown(client.tenant_token().await.expect("fresh")), "t-5");
    }

    #[tokio::test]
    async fn a_refresh_that_succeeds_replaces_the_token_at_once() {
        let (base, endpoint) = open_api().await;
        let clock = Arc::new(ManualClock::at(UnixMs(0)));
        let client = client(base).with_clock(clock.clone());
        assert_eq!(shown(client.tenant_token().await.expect("a token")), "t-1");
        clock.advance(Duration::from_secs(6_601));
        assert_eq!(shown(client.tenant_token().await.expect("fresh")), "t-2");
        assert_eq!(shown(client.tenant_token().await.expect("cached")), "t-2");
        assert_eq!(endpoint.requests(), 2);
    }

    #[tokio::test]
    async fn a_required_call_retries_a_token_fetch_that_fails() {
        let (base, endpoint) = open_api().await;
        let client = client(base);
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
        let err = client(format!("http://{addr}"))
            .call::<serde_json::Value>(
                crate::feishu_api::call::Call {
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
