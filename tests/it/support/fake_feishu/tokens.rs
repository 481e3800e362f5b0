//! The fake's tenant access tokens, as Feishu issues them: a token lasts `expire`
//! seconds (two hours); asked again while it has thirty minutes or more left, the
//! endpoint answers the same token with the time it has left; with less, it issues a new
//! one, and the old one stays valid until its own expiry. Tests can make the endpoint
//! fail (a gateway's 502 page, an answer cut in transit, a non-zero code) and move the
//! fake's clock forward, so "two hours later" is a call, not a wait.

use std::{
    collections::VecDeque,
    sync::{
        Arc, Mutex,
        atomic::{AtomicU64, Ordering},
    },
    time::{Duration, Instant},
};

use axum::{
    Json,
    body::Bytes,
    extract::State,
    http::{StatusCode, Uri},
    response::{IntoResponse, Response},
};
use serde_json::{Value, json};

use super::{
    FakeState,
    gate::{bad_gateway, cut},
};

const TOKEN: &str = "POST /open-apis/auth/v3/tenant_access_token/internal";

/// Below this much life left, asking gives a new token (Feishu's rule).
const REISSUE_BELOW: Duration = Duration::from_secs(30 * 60);

/// One way the token endpoint fails.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TokenFault {
    /// HTTP 502 with an HTML page.
    BadGateway,
    /// The answer is cut in transit (a transport error for the client).
    Cut,
    /// HTTP 200 with this non-zero code (e.g. 1, "system busy").
    Code(i64),
}

/// The tokens issued, and the endpoint's planned failures.
#[derive(Debug)]
pub struct Tokens {
    /// `expire` of tokens issued from now on, in seconds.
    expire: AtomicU64,
    /// How far the fake's clock is ahead of the real one, in ms.
    ahead_ms: AtomicU64,
    /// Issued tokens and when each expires; revoked ones are gone.
    issued: Mutex<Vec<(String, Instant)>>,
    /// Tokens issued so far (for their names).
    count: AtomicU64,
    /// The next requests' failures, in order.
    faults: Mutex<VecDeque<TokenFault>>,
    /// Requests answered with a fault.
    pub failed: AtomicU64,
}

impl Default for Tokens {
    fn default() -> Self {
        Self {
            expire: AtomicU64::new(7200),
            ahead_ms: AtomicU64::default(),
            issued: Mutex::default(),
            count: AtomicU64::default(),
            faults: Mutex::default(),
            failed: AtomicU64::default(),
        }
    }
}

impl Tokens {
    /// The fake's now.
    fn now(&self) -> Instant {
        Instant::now() + Duration::from_millis(self.ahead_ms.load(Ordering::SeqCst))
    }

    /// Moves the fake's clock forward by `by` (tokens age; nothing else is timed by it).
    pub fn advance(&self, by: Duration) {
        let ms = u64::try_from(by.as_millis()).unwrap_or(u64::MAX);
        self.ahead_ms.fetch_add(ms, Ordering::SeqCst);
    }

    /// The next requests fail with `faults`, in order.
    pub fn fail_next(&self, faults: &[TokenFault]) {
        self.faults.lock().expect("lock").extend(faults);
    }

    /// Planned failures not yet answered.
    pub fn faults_left(&self) -> usize {
        self.faults.lock().expect("lock").len()
    }

    /// The newest token still valid.
    pub fn current(&self) -> Option<String> {
        let now = self.now();
        let issued = self.issued.lock().expect("lock");
        issued
            .iter()
            .rev()
            .find(|(_, expires)| *expires > now)
            .map(|(t, _)| t.clone())
    }

    /// Whether `token` is valid now.
    pub fn valid(&self, token: &str) -> bool {
        let now = self.now();
        let issued = self.issued.lock().expect("lock");
        issued
            .iter()
            .any(|(t, expires)| t == token && *expires > now)
    }

    /// Invalidates every token issued (Feishu answers 99991663 to them from now on).
    pub fn revoke(&self) {
        self.issued.lock().expect("lock").clear();
    }

    /// The token to answer with, and its seconds left: the newest one while it has
    /// thirty minutes or more, else a new one.
    fn give(&self) -> (String, u64) {
        let now = self.now();
        let mut issued = self.issued.lock().expect("lock");
        if let Some((token, expires)) = issued.last()
            && expires.saturating_duration_since(now) >= REISSUE_BELOW
        {
            return (
                token.clone(),
                expires.saturating_duration_since(now).as_secs(),
            );
        }
        let n = self.count.fetch_add(1, Ordering::SeqCst) + 1;
        let life = self.expire.load(Ordering::SeqCst);
        let token = format!("t-fake-{n}");
        issued.push((token.clone(), now + Duration::from_secs(life)));
        (token, life)
    }
}

/// `POST /open-apis/auth/v3/tenant_access_token/internal`.
pub(super) async fn token(State(s): State<Arc<FakeState>>, uri: Uri, raw: Bytes) -> Response {
    s.token_requests.fetch_add(1, Ordering::SeqCst);
    if let Err(refused) = s.check_storm(TOKEN, uri.path()) {
        return refused.into_response();
    }
    let fault = s.tokens.faults.lock().expect("lock").pop_front();
    if let Some(fault) = fault {
        s.tokens.failed.fetch_add(1, Ordering::SeqCst);
        s.activity.send(format!("token:{fault:?}")).ok();
        return match fault {
            TokenFault::BadGateway => bad_gateway(),
            TokenFault::Cut => cut(&json!({"code": 0, "msg": "ok"})),
            TokenFault::Code(code) => s
                .refuse(TOKEN, StatusCode::OK, code, "system busy")
                .into_response(),
        };
    }
    let body: Value = serde_json::from_slice(&raw).unwrap_or(Value::Null);
    if body["app_secret"] != s.app_secret {
        return s
            .refuse(TOKEN, StatusCode::OK, 10014, "app secret invalid")
            .into_response();
    }
    let (token, expire) = s.tokens.give();
    Json(json!({"code": 0, "msg": "ok", "tenant_access_token": token, "expire": expire}))
        .into_response()
}
