//! Every route the bridge serves, and what guards it. The list is compared with the
//! router's OpenAPI document and with the committed `openapi.yaml`, so a new route fails
//! these tests until it is classified here (and, when it is an admin route, probed by
//! `auth_matrix`). The web view's HTML pages are the one set of routes outside the
//! document: they are merged from `src/http/ui/mod.rs`, and classified apart
//! ([`UI_ROUTES`], probed by `tests/it/ui/forms.rs`).

use std::collections::BTreeSet;

use utoipa::openapi::path::{Operation, PathItem};

/// What a route takes as proof of who is calling.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Guard {
    /// The admin bearer token: the route shows conversation content or the bridge's state,
    /// or changes them.
    Admin,
    /// Nothing: liveness and readiness.
    Open,
    /// Nothing, unless `server.protect_metrics` asks for the admin token.
    Metrics,
    /// The caller's signature (Feishu's, or the webhook agent's); never the admin token.
    Signed,
    /// The signed, expiring token in the path itself (a media URL given to a webhook
    /// agent); never the admin token.
    Token,
}

/// (method, path template, guard) of every route.
pub const ROUTES: &[(&str, &str, Guard)] = &[
    ("POST", "/webhook/{profile}/event", Guard::Signed),
    ("POST", "/webhook/{profile}/card", Guard::Signed),
    (
        "POST",
        "/agent/{profile}/turns/{turn_id}/output",
        Guard::Signed,
    ),
    (
        "POST",
        "/agent/{profile}/turns/{turn_id}/events",
        Guard::Signed,
    ),
    (
        "GET",
        "/agent/{profile}/turns/{turn_id}/asks/{ask_id}",
        Guard::Signed,
    ),
    (
        "POST",
        "/agent/{profile}/turns/{turn_id}/attachments",
        Guard::Signed,
    ),
    ("GET", "/media/{token}", Guard::Token),
    ("GET", "/healthz", Guard::Open),
    ("GET", "/readyz", Guard::Open),
    ("GET", "/metrics", Guard::Metrics),
    ("GET", "/status", Guard::Admin),
    ("GET", "/sessions", Guard::Admin),
    ("GET", "/sessions/{session_key}", Guard::Admin),
    ("DELETE", "/sessions/{session_key}", Guard::Admin),
    ("GET", "/explain/message/{message_id}", Guard::Admin),
    ("GET", "/explain/{root_msg_id}", Guard::Admin),
    ("POST", "/explain/{root_msg_id}/what-if", Guard::Admin),
    ("GET", "/turns", Guard::Admin),
    ("GET", "/turns/{turn_id}", Guard::Admin),
    ("GET", "/feed", Guard::Admin),
    ("POST", "/feed/flush", Guard::Admin),
    ("POST", "/digests/run", Guard::Admin),
    ("GET", "/digests", Guard::Admin),
];

/// What a web-view route takes as proof of who is calling.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UiGuard {
    /// The session cookie: a page without one is sent to sign in (303), a form is refused
    /// (403); a form also needs the session's CSRF token.
    Session,
    /// The sign-in form (the admin token, and the form's double-submit token) or, for
    /// signing out, the session and its CSRF token.
    SignIn,
    /// Nothing: the stylesheet.
    Open,
}

/// (method, path, guard) of every web-view route.
pub const UI_ROUTES: &[(&str, &str, UiGuard)] = &[
    ("GET", "/ui", UiGuard::Session),
    ("GET", "/ui/", UiGuard::Session),
    ("GET", "/ui/threads/{root_msg_id}", UiGuard::Session),
    (
        "POST",
        "/ui/threads/{root_msg_id}/what-if",
        UiGuard::Session,
    ),
    ("GET", "/ui/login", UiGuard::SignIn),
    ("POST", "/ui/login", UiGuard::SignIn),
    ("POST", "/ui/logout", UiGuard::SignIn),
    ("GET", "/ui/static/style.css", UiGuard::Open),
];

/// `METHOD /path` of every `.route("/path", get(…).post(…))` in a router's source.
fn declared_routes(source: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for call in source.split(".route(").skip(1) {
        let Some(path) = call.split('"').nth(1) else {
            continue;
        };
        let handlers = call.split(".layer(").next().unwrap_or_default();
        for (method, name) in [("GET", "get("), ("POST", "post("), ("DELETE", "delete(")] {
            let found = handlers.match_indices(name).any(|(at, _)| {
                at == 0 || !handlers[..at].ends_with(|c: char| c.is_alphanumeric() || c == '_')
            });
            if found {
                out.insert(format!("{method} {path}"));
            }
        }
    }
    out
}

#[test]
fn every_web_view_route_is_classified() {
    let declared = declared_routes(include_str!("../../../src/http/ui/mod.rs"));
    let classified: BTreeSet<String> = UI_ROUTES
        .iter()
        .map(|(m, p, _)| format!("{m} {p}"))
        .collect();
    assert_eq!(
        declared, classified,
        "the web view's routes and the classified ones differ: classify it in UI_ROUTES"
    );
    assert!(
        declared
            .iter()
            .all(|r| r.split(' ').nth(1).is_some_and(|p| p.starts_with("/ui")))
    );
}

/// `METHOD /template` of every route with this guard.
pub fn guarded_by(guard: Guard) -> BTreeSet<String> {
    ROUTES
        .iter()
        .filter(|(_, _, g)| *g == guard)
        .map(|(m, p, _)| format!("{m} {p}"))
        .collect()
}

fn operations(item: &PathItem) -> Vec<(&'static str, &Operation)> {
    [
        ("GET", &item.get),
        ("POST", &item.post),
        ("PUT", &item.put),
        ("PATCH", &item.patch),
        ("DELETE", &item.delete),
        ("HEAD", &item.head),
        ("OPTIONS", &item.options),
        ("TRACE", &item.trace),
    ]
    .into_iter()
    .filter_map(|(m, op)| Some((m, op.as_ref()?)))
    .collect()
}

/// The operations of the router's document: `METHOD /template` → whether it declares the
/// bearer scheme.
fn documented() -> Vec<(String, bool)> {
    let doc = feishu_bridge::http::openapi::document();
    let mut out = Vec::new();
    for (path, item) in &doc.paths.paths {
        for (method, op) in operations(item) {
            let bearer = serde_json::to_string(&op.security)
                .unwrap_or_default()
                .contains("\"bearer\"");
            out.push((format!("{method} {path}"), bearer));
        }
    }
    out
}

/// The operations of the committed `openapi.yaml`, read line by line: a path at two
/// spaces of indent, its methods at four.
fn committed() -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut path = None;
    for line in include_str!("../../../openapi.yaml").lines() {
        if let Some(p) = line.strip_prefix("  /").and_then(|p| p.strip_suffix(':')) {
            path = Some(format!("/{p}"));
        } else if !line.starts_with("  ") {
            path = None;
        } else if let (Some(p), Some(m)) = (&path, line.strip_prefix("    ")) {
            let method = m.trim_end_matches(':');
            let known = [
                "get", "post", "put", "patch", "delete", "head", "options", "trace",
            ];
            if m.ends_with(':') && known.contains(&method) {
                out.insert(format!("{} {p}", method.to_uppercase()));
            }
        }
    }
    out
}

#[test]
fn every_route_is_classified_and_the_document_says_which_need_the_token() {
    let classified: BTreeSet<String> = ROUTES.iter().map(|(m, p, _)| format!("{m} {p}")).collect();
    assert_eq!(classified.len(), ROUTES.len(), "a route is listed twice");
    let documented = documented();
    let served: BTreeSet<String> = documented.iter().map(|(op, _)| op.clone()).collect();
    assert_eq!(
        served, classified,
        "the router's routes and the classified ones differ: classify a new route in ROUTES"
    );
    assert_eq!(
        committed(),
        classified,
        "openapi.yaml and the classified routes differ"
    );
    let admin = guarded_by(Guard::Admin);
    for (op, bearer) in &documented {
        assert_eq!(
            *bearer,
            admin.contains(op),
            "{op}: the document's bearer requirement and the classification disagree"
        );
    }
}

#[test]
fn every_route_is_declared_where_the_document_sees_it() {
    // A route added with plain `.route(…)`, `.nest(…)` or `.merge(…)` would be served but
    // missing from the document, and so from the classification above.
    // The one exception: the web view's HTML pages, classified in `UI_ROUTES`.
    let router = include_str!("../../../src/http/router.rs").replace(".merge(ui::routes())", "");
    for call in [
        ".route(\"",
        ".nest(",
        ".merge(",
        ".nest_service(",
        ".route_service(",
    ] {
        assert!(
            !router.contains(call),
            "src/http/router.rs adds a route with `{call}`: declare it with routes!(…)"
        );
    }
}
