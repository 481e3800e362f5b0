//! Signing in with the admin token, and out.

use axum::{
    Form,
    extract::{Query, State},
    http::{HeaderMap, StatusCode, header},
    response::{AppendHeaders, IntoResponse, Redirect, Response},
};
use serde::Deserialize;

use super::super::{
    html::{Html, csrf_field, page},
    session::{
        Keys, LOGIN_COOKIE, SESSION_COOKIE, SESSION_SECS, UiSession, cookies, forbidden,
        login_cookie, nonce, over_https, safe_next, set_cookie,
    },
};
use crate::{http::AppState, protocol::crypto::ct_eq};

/// Where to go once signed in.
#[derive(Debug, Deserialize)]
pub struct Next {
    #[serde(default)]
    next: String,
}

/// The sign-in form as posted. Absent fields are empty, so a form without its token is
/// refused like one with a wrong token.
#[derive(Debug, Deserialize)]
pub struct LoginForm {
    #[serde(default)]
    token: String,
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    next: String,
}

/// A form carrying only its CSRF token.
#[derive(Debug, Deserialize)]
pub struct CsrfForm {
    #[serde(default)]
    csrf: String,
}

/// `GET /ui/login`: the form (or, without an admin token, a session at once).
pub async fn form(
    State(app): State<AppState>,
    headers: HeaderMap,
    Query(q): Query<Next>,
) -> Response {
    let keys = Keys::of(&app);
    let now = app.clock.now().millis() / 1000;
    let signed_in = cookies(&headers, SESSION_COOKIE).any(|v| keys.session(v, now).is_some());
    if signed_in || app.config.server.admin_token().is_none() {
        return signed_in_to(&keys, &headers, &q.next, now, !signed_in);
    }
    // The tab's earlier form cookie is kept, so two open sign-in tabs both work.
    let login = cookies(&headers, LOGIN_COOKIE)
        .find(|v| v.len() == 32 && v.bytes().all(|b| b.is_ascii_hexdigit()))
        .map_or_else(nonce, str::to_string);
    let mut resp = login_page(StatusCode::OK, &keys, &login, &q.next, None);
    set(&mut resp, &login_cookie(&login, over_https(&headers)));
    resp
}

/// `POST /ui/login`: checks the form's token and the admin token.
pub async fn submit(
    State(app): State<AppState>,
    headers: HeaderMap,
    Form(f): Form<LoginForm>,
) -> Response {
    let keys = Keys::of(&app);
    let now = app.clock.now().millis() / 1000;
    let Some(expected) = app.config.server.admin_token() else {
        return signed_in_to(&keys, &headers, &f.next, now, true);
    };
    let Some(login) = cookies(&headers, LOGIN_COOKIE)
        .find(|v| ct_eq(keys.login_token(v).as_bytes(), f.csrf.as_bytes()))
    else {
        return forbidden();
    };
    if !ct_eq(f.token.trim().as_bytes(), expected.as_bytes()) {
        tracing::warn!("web view sign-in refused: not the admin token");
        let said = "That is not the admin token.";
        return login_page(StatusCode::UNAUTHORIZED, &keys, login, &f.next, Some(said));
    }
    signed_in_to(&keys, &headers, &f.next, now, true)
}

/// `POST /ui/logout`: clears the session cookie (a copy kept elsewhere stays valid
/// until it expires: sessions are stateless; rotating the admin token ends them all).
pub async fn logout(session: UiSession, headers: HeaderMap, Form(f): Form<CsrfForm>) -> Response {
    if !session.check(&f.csrf) {
        return forbidden();
    }
    let clear = set_cookie(SESSION_COOKIE, "", 0, over_https(&headers));
    (
        AppendHeaders([(header::SET_COOKIE, clear)]),
        Redirect::to("/ui/login"),
    )
        .into_response()
}

/// A redirect to `next` (or the thread list), with a new session cookie when `issue`.
fn signed_in_to(keys: &Keys, headers: &HeaderMap, next: &str, now: i64, issue: bool) -> Response {
    let to = safe_next(next).unwrap_or("/ui/");
    let mut resp = Redirect::to(to).into_response();
    if issue {
        let secure = over_https(headers);
        let session = keys.new_session(now);
        set(
            &mut resp,
            &set_cookie(SESSION_COOKIE, &session, SESSION_SECS, secure),
        );
        set(&mut resp, &set_cookie(LOGIN_COOKIE, "", 0, secure));
    }
    resp
}

fn set(resp: &mut Response, cookie: &str) {
    if let Ok(v) = cookie.parse() {
        resp.headers_mut().append(header::SET_COOKIE, v);
    }
}

fn login_page(
    status: StatusCode,
    keys: &Keys,
    login: &str,
    next: &str,
    said: Option<&str>,
) -> Response {
    let mut body = Html::new();
    body.raw("<h1>Sign in</h1>");
    if let Some(said) = said {
        body.el("<p class=\"error\" id=\"login-error\">", said, "</p>");
    }
    body.raw("<form method=\"post\" action=\"/ui/login\" class=\"login\">")
        .html(&csrf_field(&keys.login_token(login)))
        .raw("<input type=\"hidden\" name=\"next\" value=\"")
        .text(safe_next(next).unwrap_or("/ui/"))
        .raw("\"><label for=\"token\">Admin token (<code>server.admin_token</code>)</label>")
        .raw("<input type=\"password\" id=\"token\" name=\"token\" autocomplete=\"off\" required autofocus>")
        .raw("<button type=\"submit\" id=\"sign-in\">Sign in</button></form>");
    page(status, "Sign in", None, &body)
}
