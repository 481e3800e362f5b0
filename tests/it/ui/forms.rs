//! The web view over plain HTTP: the sign-in form and its cookies, the redirect of pages
//! without a session (and where it may send the browser back to), CSRF refusals, the
//! security headers, escaping, the open mode without an admin token, and expiry.

use std::{sync::Arc, time::Duration};

use feishu_bridge::util::{ManualClock, UnixMs};
use reqwest::{StatusCode, header};

use super::{HOSTILE, seeded};
use crate::support::{ADMIN, TestApp, TestDb, config, config_toml};

/// An HTTP client that shows redirects instead of following them.
struct Web {
    base: String,
    http: reqwest::Client,
}

/// An answer: status, `Location`, every `Set-Cookie`, the headers and the body.
struct Page {
    status: StatusCode,
    location: String,
    cookies: Vec<String>,
    headers: header::HeaderMap,
    body: String,
}

impl Web {
    fn new(app: &TestApp) -> Self {
        Self {
            base: app.base.clone(),
            http: reqwest::Client::builder()
                .redirect(reqwest::redirect::Policy::none())
                .build()
                .expect("client"),
        }
    }

    async fn send(&self, r: reqwest::RequestBuilder) -> Page {
        let resp = r.send().await.expect("sent");
        let headers = resp.headers().clone();
        let text = |n: &header::HeaderName| {
            headers
                .get(n)
                .and_then(|v| v.to_str().ok())
                .unwrap_or_default()
                .to_string()
        };
        Page {
            status: resp.status(),
            location: text(&header::LOCATION),
            cookies: headers
                .get_all(header::SET_COOKIE)
                .iter()
                .filter_map(|v| v.to_str().ok().map(str::to_string))
                .collect(),
            body: resp.text().await.unwrap_or_default(),
            headers,
        }
    }

    async fn get(&self, path: &str, cookie: &str) -> Page {
        let r = self.http.get(format!("{}{path}", self.base));
        self.send(with_cookie(r, cookie)).await
    }

    async fn post(&self, path: &str, cookie: &str, form: &[(&str, &str)]) -> Page {
        let r = self.http.post(format!("{}{path}", self.base)).form(form);
        self.send(with_cookie(r, cookie)).await
    }

    /// Signs in through the form; the session cookie (`name=value`).
    async fn sign_in(&self) -> String {
        let form = self.get("/ui/login", "").await;
        let login = cookie_pair(&form.cookies, "fb_ui_login");
        let csrf = hidden(&form.body, "csrf");
        let done = self
            .post(
                "/ui/login",
                &login,
                &[("token", ADMIN), ("csrf", &csrf), ("next", "/ui/")],
            )
            .await;
        assert_eq!(done.status, StatusCode::SEE_OTHER, "{}", done.body);
        cookie_pair(&done.cookies, "fb_ui_session")
    }
}

fn with_cookie(r: reqwest::RequestBuilder, cookie: &str) -> reqwest::RequestBuilder {
    if cookie.is_empty() {
        r
    } else {
        r.header(header::COOKIE, cookie)
    }
}

/// `name=value` of the `Set-Cookie` named `name`.
fn cookie_pair(set: &[String], name: &str) -> String {
    set.iter()
        .find(|c| c.starts_with(&format!("{name}=")))
        .and_then(|c| c.split(';').next())
        .unwrap_or_else(|| panic!("no {name} cookie in {set:?}"))
        .to_string()
}

/// The value of the hidden input `name` of a page (the first one).
fn hidden(body: &str, name: &str) -> String {
    let marker = format!("name=\"{name}\" value=\"");
    let start = body.find(&marker).expect("the hidden field") + marker.len();
    body[start..]
        .split('"')
        .next()
        .unwrap_or_default()
        .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sign_in_cookies_csrf_headers_and_escaping() {
    let db = TestDb::sqlite();
    let app = seeded(&db, "").await;
    let web = Web::new(&app);

    // Without a session: pages send the browser to sign in, and back afterwards.
    let page = web.get("/ui/threads/om_root?profile=planner", "").await;
    assert_eq!(page.status, StatusCode::SEE_OTHER);
    assert_eq!(
        page.location,
        "/ui/login?next=%2Fui%2Fthreads%2Fom_root%3Fprofile%3Dplanner"
    );
    assert_eq!(web.get("/ui/", "").await.status, StatusCode::SEE_OTHER);
    let style = web.get("/ui/static/style.css", "").await;
    assert_eq!(style.status, StatusCode::OK, "the stylesheet is public");
    let forged = web
        .post("/ui/threads/om_root/what-if", "", &[("csrf", "x")])
        .await;
    assert_eq!(forged.status, StatusCode::FORBIDDEN, "a post is refused");

    // The form sets its double-submit cookie and carries the token signed from it.
    let form = web
        .get("/ui/login?next=%2Fui%2Fthreads%2Fom_root", "")
        .await;
    assert_eq!(form.status, StatusCode::OK);
    let login = cookie_pair(&form.cookies, "fb_ui_login");
    let set = &form.cookies[0];
    for flag in ["HttpOnly", "SameSite=Strict", "Path=/ui", "Max-Age="] {
        assert!(set.contains(flag), "{flag} in {set}");
    }
    let csrf = hidden(&form.body, "csrf");
    assert_eq!(hidden(&form.body, "next"), "/ui/threads/om_root");
    let sign_in = |token: &'static str, csrf: String, next: &'static str| {
        let web = &web;
        let login = login.clone();
        async move {
            web.post(
                "/ui/login",
                &login,
                &[("token", token), ("csrf", &csrf), ("next", next)],
            )
            .await
        }
    };
    // A missing or wrong form token: 403, whatever the admin token.
    let no_csrf = web
        .post("/ui/login", &login, &[("token", ADMIN), ("next", "/ui/")])
        .await;
    assert_eq!(no_csrf.status, StatusCode::FORBIDDEN);
    let wrong = sign_in(ADMIN, "0".repeat(64), "/ui/").await;
    assert_eq!(wrong.status, StatusCode::FORBIDDEN);
    let without_cookie = web
        .post("/ui/login", "", &[("token", ADMIN), ("csrf", &csrf)])
        .await;
    assert_eq!(without_cookie.status, StatusCode::FORBIDDEN);
    // A wrong admin token: 401, the form again, no session.
    let refused = sign_in("not-the-token", csrf.clone(), "/ui/").await;
    assert_eq!(refused.status, StatusCode::UNAUTHORIZED);
    assert!(refused.body.contains("login-error"));
    assert!(
        refused
            .cookies
            .iter()
            .all(|c| !c.starts_with("fb_ui_session"))
    );
    // The right one: a session, and back to a page of the web view only.
    let ok = sign_in(ADMIN, csrf.clone(), "https://evil.example/ui/").await;
    assert_eq!(ok.status, StatusCode::SEE_OTHER);
    assert_eq!(ok.location, "/ui/", "a foreign next is not followed");
    let ok = sign_in(ADMIN, csrf.clone(), "/ui/threads/om_root").await;
    assert_eq!(ok.location, "/ui/threads/om_root");
    let session_set = ok
        .cookies
        .iter()
        .find(|c| c.starts_with("fb_ui_session="))
        .expect("a session cookie");
    for flag in ["HttpOnly", "SameSite=Strict", "Path=/ui", "Max-Age=43200"] {
        assert!(session_set.contains(flag), "{flag} in {session_set}");
    }
    assert!(!session_set.contains("Secure"), "plain http: {session_set}");
    assert!(ok.cookies.iter().any(|c| c.starts_with("fb_ui_login=;")));
    let session = cookie_pair(&ok.cookies, "fb_ui_session");

    // Behind an https proxy the cookies are Secure.
    let secure = web
        .send(
            web.http
                .get(format!("{}/ui/login", web.base))
                .header("x-forwarded-proto", "https"),
        )
        .await;
    assert!(
        secure.cookies[0].contains("; Secure"),
        "{:?}",
        secure.cookies
    );

    // A page: the headers, and the hostile text as text.
    let page = web.get("/ui/threads/om_root", &session).await;
    assert_eq!(page.status, StatusCode::OK, "{}", page.body);
    let h = |n: &str| {
        page.headers
            .get(n)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_string()
    };
    let csp = h("content-security-policy");
    for part in [
        "default-src 'self'",
        "script-src 'none'",
        "frame-ancestors 'none'",
    ] {
        assert!(csp.contains(part), "{part} in {csp}");
    }
    assert_eq!(h("x-frame-options"), "DENY");
    assert_eq!(h("x-content-type-options"), "nosniff");
    assert_eq!(h("referrer-policy"), "no-referrer");
    assert_eq!(h("cache-control"), "no-store");
    assert!(h("content-type").starts_with("text/html"));
    assert!(
        page.body
            .contains("&lt;script&gt;document.title=&#39;pwned&#39;&lt;/script&gt;&lt;img src=x")
    );
    assert!(!page.body.contains("<script") && !page.body.contains("<img"));
    assert!(!HOSTILE.is_empty());

    // Forms without this session's token are refused, and change nothing.
    let csrf = hidden(&page.body, "csrf");
    for bad in ["", "nope", &"0".repeat(64)] {
        let p = web
            .post(
                "/ui/threads/om_root/what-if",
                &session,
                &[("csrf", bad), ("thread_context_limit", "1")],
            )
            .await;
        assert_eq!(p.status, StatusCode::FORBIDDEN, "{bad:?}");
        let out = web.post("/ui/logout", &session, &[("csrf", bad)]).await;
        assert_eq!(out.status, StatusCode::FORBIDDEN, "{bad:?}");
    }
    // With this session's token: a what-if runs (no agent is called, nothing is queued),
    // and a bad setting is named.
    let turns = || async {
        let filter = feishu_bridge::store::TurnFilter {
            limit: 100,
            ..Default::default()
        };
        app.state.store.turns(&filter).await.expect("turns").len()
    };
    let before = turns().await;
    let decision_id = hidden(&page.body, "decision_id");
    let what_if = |fields: Vec<(&'static str, String)>| {
        let mut form = vec![
            ("csrf", csrf.clone()),
            ("profile", "planner".to_string()),
            ("decision_id", decision_id.clone()),
        ];
        for (k, v) in fields {
            match form.iter_mut().find(|(name, _)| *name == k) {
                Some(field) => field.1 = v,
                None => form.push((k, v)),
            }
        }
        let web = &web;
        let session = session.clone();
        async move {
            let pairs: Vec<(&str, &str)> = form.iter().map(|(k, v)| (*k, v.as_str())).collect();
            web.post("/ui/threads/om_root/what-if", &session, &pairs)
                .await
        }
    };
    let same = what_if(vec![]).await;
    assert_eq!(same.status, StatusCode::OK, "{}", same.body);
    assert!(
        same.body.contains("id=\"unchanged\""),
        "no setting, no difference"
    );
    let smaller = what_if(vec![("thread_context_limit", "1".into())]).await;
    assert_eq!(smaller.status, StatusCode::OK);
    assert!(smaller.body.contains("class=\"item dropped\""));
    assert!(
        !smaller.body.contains("<script"),
        "the previews are escaped"
    );
    let bad = what_if(vec![("thread_context_limit", "lots".into())]).await;
    assert_eq!(bad.status, StatusCode::BAD_REQUEST);
    assert!(bad.body.contains("thread_context_limit"), "{}", bad.body);
    let ghost = what_if(vec![("profile", "ghost".into())]).await;
    assert_eq!(ghost.status, StatusCode::NOT_FOUND);
    assert_eq!(turns().await, before, "a what-if queues no turn");

    let other = web.sign_in().await;
    let other_csrf = hidden(&web.get("/ui/", &other).await.body, "csrf");
    assert_ne!(other_csrf, csrf, "each session has its own token");
    let crossed = web
        .post("/ui/logout", &session, &[("csrf", &other_csrf)])
        .await;
    assert_eq!(crossed.status, StatusCode::FORBIDDEN);
    assert_eq!(web.get("/ui/", &session).await.status, StatusCode::OK);

    // A tampered cookie is no session.
    let tampered = format!("{}0", session.trim_end_matches(char::is_alphanumeric));
    assert_eq!(
        web.get("/ui/", &tampered).await.status,
        StatusCode::SEE_OTHER
    );

    // Unknown threads and profiles.
    let missing = web.get("/ui/threads/om_nothing", &session).await;
    assert_eq!(missing.status, StatusCode::NOT_FOUND);
    assert!(
        missing.headers[header::CONTENT_TYPE]
            .to_str()
            .unwrap_or_default()
            .starts_with("text/html")
    );
    let ghost = web.get("/ui/threads/om_root?profile=ghost", &session).await;
    assert_eq!(ghost.status, StatusCode::NOT_FOUND);

    // Signing out clears the cookie.
    let out = web.post("/ui/logout", &session, &[("csrf", &csrf)]).await;
    assert_eq!(out.status, StatusCode::SEE_OTHER);
    assert_eq!(out.location, "/ui/login");
    assert!(out.cookies[0].starts_with("fb_ui_session=;") && out.cookies[0].contains("Max-Age=0"));

    // The admin token is in no page and no cookie.
    for path in [
        "/ui/",
        "/ui/threads/om_root",
        "/ui/threads/om_root?profile=planner",
    ] {
        let p = web.get(path, &other).await;
        assert_eq!(p.status, StatusCode::OK);
        assert!(!p.body.contains(ADMIN), "{path}");
    }
    for c in [&session, &other, &login] {
        assert!(!c.contains(ADMIN));
    }
    app.stop().await.expect("clean stop");
}

#[tokio::test]
async fn without_an_admin_token_no_sign_in_is_needed() {
    let db = TestDb::sqlite();
    let text = config_toml(&db, "").replace(&format!("admin_token = \"{ADMIN}\"\n"), "");
    let app = TestApp::spawn(config(&text)).await;
    let web = Web::new(&app);
    let page = web.get("/ui/", "").await;
    assert_eq!(page.status, StatusCode::SEE_OTHER);
    // The sign-in page issues a session at once and sends the browser back.
    let login = web.get(&page.location, "").await;
    assert_eq!(login.status, StatusCode::SEE_OTHER);
    assert_eq!(login.location, "/ui/");
    let session = cookie_pair(&login.cookies, "fb_ui_session");
    let list = web.get("/ui/", &session).await;
    assert_eq!(list.status, StatusCode::OK);
    // Forms still need the session's token.
    let out = web.post("/ui/logout", &session, &[("csrf", "x")]).await;
    assert_eq!(out.status, StatusCode::FORBIDDEN);
    let csrf = hidden(&list.body, "csrf");
    let out = web.post("/ui/logout", &session, &[("csrf", &csrf)]).await;
    assert_eq!(out.status, StatusCode::SEE_OTHER);
    app.stop().await.expect("clean stop");
}

#[tokio::test]
async fn a_session_ends_when_it_expires() {
    let db = TestDb::sqlite();
    let clock = Arc::new(ManualClock::at(UnixMs(1_800_000_000_000)));
    let app = TestApp::spawn_with_clock(config(&config_toml(&db, "")), clock.clone()).await;
    let web = Web::new(&app);
    let session = web.sign_in().await;
    assert_eq!(web.get("/ui/", &session).await.status, StatusCode::OK);
    clock.advance(Duration::from_secs(12 * 3600 - 1));
    assert_eq!(web.get("/ui/", &session).await.status, StatusCode::OK);
    clock.advance(Duration::from_secs(1));
    let expired = web.get("/ui/", &session).await;
    assert_eq!(expired.status, StatusCode::SEE_OTHER);
    assert!(expired.location.starts_with("/ui/login"));
    app.stop().await.expect("clean stop");
}
