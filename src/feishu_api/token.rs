//! The tenant access token of one app's client: cached (never one request per message)
//! and replaced a while before it expires.
//!
//! Feishu keeps a token valid until its own expiry while it issues the next one, so a
//! refresh that fails — the token endpoint unreachable, timing out, answering a 5xx page
//! or a non-zero code — keeps using the cached token until then, trying again every
//! [`REFRESH_RETRY`]. Only one caller refreshes at a time; the others go on with the
//! token at hand while it lasts. A call that finds no token at all retries the fetch
//! with its own backoff (see `call`).

use std::{sync::Arc, time::Duration};

use secrecy::{ExposeSecret, SecretString};
use serde::Deserialize;

use super::{
    budget::{Budget, Urgency},
    error::{OpenApiError, TOKEN_ENDPOINT, decode},
};
use crate::util::{Clock, SystemClock, UnixMs};

/// How long after a failed refresh the next one is tried, while the cached token lasts.
pub const REFRESH_RETRY: Duration = Duration::from_secs(5);

/// How long before its expiry a token is replaced: a tenth of its life, at most ten
/// minutes (Feishu issues a new one once less than thirty are left).
fn refresh_margin(life: Duration) -> Duration {
    (life / 10).min(Duration::from_secs(600))
}

#[derive(Clone)]
struct CachedToken {
    value: SecretString,
    /// When to replace it.
    refresh_at: UnixMs,
    /// When Feishu stops taking it.
    expires_at: UnixMs,
}

/// The refresher's own state.
#[derive(Default)]
struct Refresh {
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

/// One app's tenant access token.
pub(super) struct TenantToken {
    http: reqwest::Client,
    /// The token endpoint's URL.
    url: String,
    app_id: String,
    app_secret: Option<SecretString>,
    cached: std::sync::Mutex<Option<CachedToken>>,
    /// Held by the one caller fetching a token.
    refresh: tokio::sync::Mutex<Refresh>,
    /// The app's call budget: a fetch is a call too.
    budget: Arc<Budget>,
    /// Where lifetimes are read.
    clock: Arc<dyn Clock>,
}

impl TenantToken {
    /// The token of app `app_id` from the Open API at `base`.
    pub(super) fn new(
        http: reqwest::Client,
        base: &str,
        app_id: &str,
        app_secret: Option<SecretString>,
        budget: Arc<Budget>,
    ) -> Self {
        Self {
            http,
            url: format!("{base}/open-apis/auth/v3/tenant_access_token/internal"),
            app_id: app_id.to_string(),
            app_secret: app_secret.filter(|s| !s.expose_secret().is_empty()),
            cached: std::sync::Mutex::new(None),
            refresh: tokio::sync::Mutex::default(),
            budget,
            clock: Arc::new(SystemClock),
        }
    }

    /// Reads lifetimes from `clock` (the app's).
    pub(super) fn set_clock(&mut self, clock: Arc<dyn Clock>) {
        self.clock = clock;
    }

    /// Whether there is a secret to fetch with.
    pub(super) fn has_secret(&self) -> bool {
        self.app_secret.is_some()
    }

    /// The cached token, if `keep` says it is still good.
    fn cached(&self, keep: impl Fn(&CachedToken) -> bool) -> Option<SecretString> {
        let cached = self.cached.lock().unwrap_or_else(|e| e.into_inner());
        cached.as_ref().filter(|t| keep(t)).map(|t| t.value.clone())
    }

    /// The tenant access token: the cached one until it is due for replacement; then a
    /// fresh one, or — while the refresh fails — the cached one until it expires.
    pub(super) async fn get(&self) -> Result<SecretString, OpenApiError> {
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
        match self.fetch().await {
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
    async fn fetch(&self) -> Result<SecretString, OpenApiError> {
        let secret = self.app_secret.as_ref().ok_or(OpenApiError::NoSecret)?;
        let body = serde_json::json!({"app_id": self.app_id, "app_secret": secret.expose_secret()});
        self.budget.take(Urgency::Required).await;
        // Feishu counts the token's life from before it answers.
        let asked = self.clock.now();
        let resp = self
            .http
            .post(&self.url)
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
        *self.cached.lock().unwrap_or_else(|e| e.into_inner()) = Some(CachedToken {
            value: token.clone(),
            refresh_at: expires_at - refresh_margin(life),
            expires_at,
        });
        Ok(token)
    }

    /// Drops the cached token (after the API called it invalid).
    pub(super) fn forget(&self) {
        *self.cached.lock().unwrap_or_else(|e| e.into_inner()) = None;
    }
}

#[cfg(test)]
pub(super) mod tests {
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
    use crate::util::{ManualClock, testing::serve};

    /// The token of app `cli_test` from the Open API at `base`, on `clock`.
    fn token(base: &str, clock: Arc<ManualClock>) -> TenantToken {
        let secret = Some(SecretString::from("app-secret-of-the-token-tests"));
        let mut token = TenantToken::new(
            reqwest::Client::new(),
            base,
            "cli_test",
            secret,
            Arc::default(),
        );
        token.set_clock(clock);
        token
    }

    /// How the fake token endpoint answers one request.
    #[derive(Clone, Copy)]
    pub(in crate::feishu_api) enum Answer {
        Token,
        /// A gateway's page.
        BadGateway,
        /// A non-zero code ("system busy").
        Busy,
    }

    /// A token endpoint answering from `plan` (then tokens), counting requests; each
    /// token it issues is `t-<request number>`, for two hours.
    pub(in crate::feishu_api) struct TokenEndpoint {
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

        pub(in crate::feishu_api) fn requests(&self) -> usize {
            self.requests.load(Ordering::SeqCst)
        }

        pub(in crate::feishu_api) fn fail_next(&self, answers: &[Answer]) {
            self.plan.lock().expect("lock").extend(answers);
        }
    }

    /// The endpoint, plus a bot info route that wants token `t-<n>` for any `n`.
    pub(in crate::feishu_api) async fn open_api() -> (String, Arc<TokenEndpoint>) {
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
        let client = token(&base, clock.clone());
        let token = client.get().await.expect("a token");
        assert_eq!((shown(token), endpoint.requests()), ("t-1".into(), 1));

        // Cached until a tenth of its life is left.
        clock.advance(Duration::from_secs(6_000));
        assert_eq!(shown(client.get().await.expect("cached")), "t-1");
        assert_eq!(endpoint.requests(), 1);

        // Due for replacement; the refresh fails: the cached token serves, and the
        // refresh is tried again only after REFRESH_RETRY.
        clock.advance(Duration::from_secs(700));
        endpoint.fail_next(&[Answer::BadGateway, Answer::Busy, Answer::BadGateway]);
        assert_eq!(shown(client.get().await.expect("served")), "t-1");
        assert_eq!(shown(client.get().await.expect("served")), "t-1");
        assert_eq!(endpoint.requests(), 2, "no second try at once");
        clock.advance(REFRESH_RETRY);
        assert_eq!(shown(client.get().await.expect("served")), "t-1");
        assert_eq!(endpoint.requests(), 3, "tried again");

        // Past its expiry it is not used: the failure is the caller's.
        clock.advance(Duration::from_secs(600));
        let err = client.get().await.expect_err("no token");
        assert!(
            matches!(err, OpenApiError::Status { status: 502, .. }),
            "{err:?}"
        );
        assert_eq!(endpoint.requests(), 4);

        // The endpoint is back: a new token.
        assert_eq!(shown(client.get().await.expect("fresh")), "t-5");
    }

    #[tokio::test]
    async fn a_refresh_that_succeeds_replaces_the_token_at_once() {
        let (base, endpoint) = open_api().await;
        let clock = Arc::new(ManualClock::at(UnixMs(0)));
        let client = token(&base, clock.clone());
        assert_eq!(shown(client.get().await.expect("a token")), "t-1");
        clock.advance(Duration::from_secs(6_601));
        assert_eq!(shown(client.get().await.expect("fresh")), "t-2");
        assert_eq!(shown(client.get().await.expect("cached")), "t-2");
        assert_eq!(endpoint.requests(), 2);
    }
}
