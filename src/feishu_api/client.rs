//! A small Open API client for one app: its tenant access token (cached, never one
//! request per message: see `token`) and the app's call budget.

use std::sync::Arc;

use secrecy::SecretString;

use super::{OpenApiError, budget::Budget, token::TenantToken};
use crate::{config::Profile, util::Clock};

/// One app's client.
pub struct FeishuClient {
    pub(super) http: reqwest::Client,
    pub(super) base: String,
    app_id: String,
    token: TenantToken,
    /// Shared by every client of the same app.
    pub(super) budget: Arc<Budget>,
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
        Self::of_app(
            http,
            &profile.api_base,
            &profile.app_id,
            profile.app_secret.clone(),
            budget,
        )
    }

    fn of_app(
        http: reqwest::Client,
        base: &str,
        app_id: &str,
        app_secret: Option<SecretString>,
        budget: Arc<Budget>,
    ) -> Self {
        let base = base.trim_end_matches('/').to_string();
        let token = TenantToken::new(http.clone(), &base, app_id, app_secret, budget.clone());
        Self {
            http,
            base,
            app_id: app_id.to_string(),
            token,
            budget,
        }
    }

    /// The client reading token lifetimes from `clock` (the app's).
    pub fn with_clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.token.set_clock(clock);
        self
    }

    /// Whether the client has a secret to send with.
    pub fn can_send(&self) -> bool {
        self.token.has_secret()
    }

    /// The tenant access token (see `token`).
    pub async fn tenant_token(&self) -> Result<SecretString, OpenApiError> {
        self.token.get().await
    }

    /// Drops the cached token (after the API called it invalid).
    pub(super) fn forget_token(&self) {
        self.token.forget();
    }

    /// A client of app `cli_test` with `secret` against `base` (unit tests).
    #[cfg(test)]
    pub(super) fn for_tests(base: String, secret: &str) -> Self {
        let secret = Some(SecretString::from(secret));
        Self::of_app(
            reqwest::Client::new(),
            &base,
            "cli_test",
            secret,
            Arc::default(),
        )
    }
}

#[cfg(test)]
pub(super) mod tests {
    use std::error::Error as _;

    use axum::{Json, Router, routing::post};
    use serde_json::{Value, json};

    use super::*;
    use crate::feishu_api::{OpenApiError, error::TOKEN_ENDPOINT};

    pub(crate) const SECRET: &str = "app-secret-never-shown-5c1e";

    /// A client of app `cli_test` against `base`.
    pub(crate) fn client(base: String) -> FeishuClient {
        FeishuClient::for_tests(base, SECRET)
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
