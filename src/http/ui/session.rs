//! The web view's session cookie and CSRF tokens, stateless so every replica checks what
//! any other issued.
//!
//! A session cookie is `v1.<expiry>.<nonce>.<mac>`: the expiry in Unix seconds, 16
//! random bytes, and an HMAC-SHA256 over both under a key derived from the admin token
//! (so a rotated token ends every session). Nothing of the token is in it. A form's
//! CSRF token is the HMAC of the session's nonce: only a page of the session can know
//! it. The sign-in form, before any session, uses a signed double submit: the page sets
//! a short-lived random `fb_ui_login` cookie and puts the HMAC of its value in the form.
//! Every cookie is `HttpOnly`, `SameSite=Strict`, `Path=/ui`, and `Secure` when the
//! request came over https (the reverse proxy's `X-Forwarded-Proto`). Every comparison
//! is constant-time.

use axum::{
    extract::FromRequestParts,
    http::{HeaderMap, Method, StatusCode, header, request::Parts},
    response::{IntoResponse, Redirect, Response},
};
use hmac::{Hmac, Mac};
use sha2::Sha256;

use super::html::{encode, message};
use crate::{http::AppState, protocol::crypto::ct_eq};

/// The session cookie.
pub const SESSION_COOKIE: &str = "fb_ui_session";
/// The sign-in form's double-submit cookie.
pub const LOGIN_COOKIE: &str = "fb_ui_login";
/// How long a session lasts.
pub const SESSION_SECS: i64 = 12 * 3600;
/// How long a sign-in form stays usable.
const LOGIN_SECS: i64 = 1800;

/// The key every cookie and token is signed with: derived from the admin token, or,
/// with none configured (the open mode of the admin routes), from a fixed label — then
/// anyone who reaches the bridge may sign in anyway, and the CSRF tokens still need the
/// `HttpOnly` nonce a foreign page cannot read.
#[derive(Clone)]
pub struct Keys {
    key: [u8; 32],
}

impl Keys {
    /// The keys of this bridge.
    pub fn of(app: &AppState) -> Self {
        let secret = app.config.server.admin_token().unwrap_or_default();
        let mut mac =
            Hmac::<Sha256>::new_from_slice(secret.as_bytes()).expect("HMAC takes any key length");
        mac.update(b"feishu-bridge web view v1");
        Self {
            key: mac.finalize().into_bytes().into(),
        }
    }

    fn mac(&self, parts: &[&str]) -> String {
        let mut mac = Hmac::<Sha256>::new_from_slice(&self.key).expect("HMAC takes any key length");
        for p in parts {
            mac.update(p.as_bytes());
            mac.update(b"|");
        }
        hex::encode(mac.finalize().into_bytes())
    }

    /// A new session's cookie value, valid until `now + SESSION_SECS`.
    pub fn new_session(&self, now_secs: i64) -> String {
        let expiry = (now_secs + SESSION_SECS).to_string();
        let nonce = nonce();
        let mac = self.mac(&["session", &expiry, &nonce]);
        format!("v1.{expiry}.{nonce}.{mac}")
    }

    /// The session a cookie value proves, if it is ours and unexpired.
    pub fn session(&self, value: &str, now_secs: i64) -> Option<UiSession> {
        let mut parts = value.split('.');
        let (Some("v1"), Some(expiry), Some(nonce), Some(mac), None) = (
            parts.next(),
            parts.next(),
            parts.next(),
            parts.next(),
            parts.next(),
        ) else {
            return None;
        };
        let expected = self.mac(&["session", expiry, nonce]);
        if !ct_eq(expected.as_bytes(), mac.as_bytes()) {
            return None;
        }
        let until: i64 = expiry.parse().ok()?;
        (until > now_secs).then(|| UiSession {
            csrf: self.mac(&["csrf", nonce]),
        })
    }

    /// The sign-in form's token for a `fb_ui_login` cookie value.
    pub fn login_token(&self, login_nonce: &str) -> String {
        self.mac(&["login", login_nonce])
    }
}

/// 16 random bytes, hex.
pub fn nonce() -> String {
    hex::encode(rand::random::<[u8; 16]>())
}

/// A signed-in browser: what its forms must carry.
#[derive(Debug, Clone)]
pub struct UiSession {
    csrf: String,
}

impl UiSession {
    /// The CSRF token of this session's forms.
    pub fn csrf(&self) -> &str {
        &self.csrf
    }

    /// Whether a form's token is this session's; a POST that fails this is refused 403
    /// ([`forbidden`]).
    pub fn check(&self, given: &str) -> bool {
        ct_eq(self.csrf.as_bytes(), given.as_bytes())
    }
}

/// The refusal of a state-changing request without its proof.
pub fn forbidden() -> Response {
    message(
        StatusCode::FORBIDDEN,
        "Forbidden",
        "The form was not sent from this session's own page (missing or wrong CSRF token). \
         Reload the page and try again.",
    )
}

impl FromRequestParts<AppState> for UiSession {
    type Rejection = Response;

    /// A valid session cookie; otherwise a page is sent to sign in (303, back here
    /// afterwards) and a form post is refused (403).
    async fn from_request_parts(parts: &mut Parts, app: &AppState) -> Result<Self, Response> {
        let keys = Keys::of(app);
        let now = app.clock.now().millis() / 1000;
        if let Some(s) = cookies(&parts.headers, SESSION_COOKIE).find_map(|v| keys.session(v, now))
        {
            return Ok(s);
        }
        if parts.method != Method::GET && parts.method != Method::HEAD {
            return Err(forbidden());
        }
        let here = parts
            .uri
            .path_and_query()
            .map(|p| p.as_str())
            .unwrap_or("/ui/");
        let to = match safe_next(here) {
            Some(next) => format!("/ui/login?next={}", encode(next)),
            None => "/ui/login".to_string(),
        };
        Err(Redirect::to(&to).into_response())
    }
}

/// `next` when it is a path of the web view itself (so a sign-in link cannot send the
/// browser elsewhere): `/ui` or under `/ui/`, visible ASCII, no `//`, `\` or `..`.
pub fn safe_next(next: &str) -> Option<&str> {
    let under_ui = next == "/ui" || next.starts_with("/ui/") || next.starts_with("/ui?");
    let plain = next.len() <= 1024 && next.bytes().all(|b| b.is_ascii_graphic());
    let path = next.split(['?', '#']).next().unwrap_or_default();
    let tricky = next.contains('\\') || path.contains("//") || path.split('/').any(|s| s == "..");
    (under_ui && plain && !tricky).then_some(next)
}

/// The values of cookie `name` in the request.
pub fn cookies<'a>(headers: &'a HeaderMap, name: &'a str) -> impl Iterator<Item = &'a str> + 'a {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(move |pair| {
            let (k, v) = pair.trim().split_once('=')?;
            (k == name).then_some(v)
        })
}

/// Whether the request reached the reverse proxy over https.
pub fn over_https(headers: &HeaderMap) -> bool {
    headers
        .get("x-forwarded-proto")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(',').next())
        .is_some_and(|p| p.trim().eq_ignore_ascii_case("https"))
}

/// A `Set-Cookie` value: `HttpOnly; SameSite=Strict; Path=/ui`, `Secure` over https,
/// living `max_age` seconds (0 clears it).
pub fn set_cookie(name: &str, value: &str, max_age: i64, secure: bool) -> String {
    let secure = if secure { "; Secure" } else { "" };
    format!("{name}={value}; Max-Age={max_age}; Path=/ui; HttpOnly; SameSite=Strict{secure}")
}

/// The sign-in form's cookie.
pub fn login_cookie(value: &str, secure: bool) -> String {
    set_cookie(LOGIN_COOKIE, value, LOGIN_SECS, secure)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(secret: &[u8]) -> Keys {
        let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(secret).expect("key");
        mac.update(b"feishu-bridge web view v1");
        Keys {
            key: mac.finalize().into_bytes().into(),
        }
    }

    #[test]
    fn a_session_holds_until_it_expires_and_only_under_its_key() {
        let k = keys(b"admin");
        let value = k.new_session(1_000);
        assert!(!value.contains("admin"));
        let s = k.session(&value, 1_001).expect("valid");
        assert!(s.check(s.csrf()));
        assert!(!s.check(""));
        assert!(k.session(&value, 1_000 + SESSION_SECS).is_none(), "expired");
        assert!(keys(b"other").session(&value, 1_001).is_none(), "other key");
        // The expiry cannot be moved without the key.
        let mut parts: Vec<&str> = value.split('.').collect();
        let later = (1_000 + 10 * SESSION_SECS).to_string();
        parts[1] = &later;
        assert!(k.session(&parts.join("."), 1_001 + SESSION_SECS).is_none());
        assert!(k.session("v1.1.2", 0).is_none());
        assert!(k.session(&format!("{value}.x"), 1_001).is_none());
    }

    #[test]
    fn sessions_have_their_own_csrf_tokens() {
        let k = keys(b"admin");
        let a = k.session(&k.new_session(0), 1).expect("a");
        let b = k.session(&k.new_session(0), 1).expect("b");
        assert_ne!(a.csrf(), b.csrf());
        assert!(!a.check(b.csrf()));
    }

    #[test]
    fn next_stays_inside_the_web_view() {
        for ok in ["/ui", "/ui/", "/ui/threads/om_1?profile=a", "/ui?x=1"] {
            assert_eq!(safe_next(ok), Some(ok), "{ok}");
        }
        for bad in [
            "https://evil.example/ui/",
            "//evil.example/ui/",
            "/ui//evil.example",
            "/ui/../status",
            "/ui\\..\\x",
            "/uix",
            "/status",
            "/ui/a b",
            "/ui/\u{7f}",
            "",
        ] {
            assert_eq!(safe_next(bad), None, "{bad}");
        }
    }

    #[test]
    fn cookies_are_found_by_name() {
        let mut h = HeaderMap::new();
        h.append(header::COOKIE, "a=1; fb_ui_session=x".parse().expect("v"));
        h.append(header::COOKIE, "fb_ui_session=y".parse().expect("v"));
        let found: Vec<&str> = cookies(&h, SESSION_COOKIE).collect();
        assert_eq!(found, ["x", "y"]);
    }

    #[test]
    fn secure_follows_the_proxy() {
        let mut h = HeaderMap::new();
        assert!(!over_https(&h));
        h.insert("x-forwarded-proto", "HTTPS, http".parse().expect("v"));
        assert!(over_https(&h));
        assert!(set_cookie("n", "v", 5, true).ends_with("; Secure"));
        assert!(!set_cookie("n", "v", 5, false).contains("Secure"));
    }
}
