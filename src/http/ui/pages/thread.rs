//! `GET /ui/threads/{root_msg_id}`: one thread's timeline — its messages with their
//! verdicts, its turns, every context decision explained, and the batched feed and
//! digests of its sessions.

use axum::{
    extract::{Path, Query, State},
    http::StatusCode,
    response::Response,
};
use serde::Deserialize;

use super::{
    super::{
        html::{Html, encode, message, page},
        session::UiSession,
    },
    decision, feed,
    records::{Thread, load},
    threads::unavailable,
    timeline,
};
use crate::http::AppState;

/// Whose view of the thread.
#[derive(Debug, Deserialize)]
pub struct ThreadQuery {
    /// One profile (default: every profile that recorded the thread).
    pub profile: Option<String>,
}

/// The page.
pub async fn show(
    session: UiSession,
    State(app): State<AppState>,
    Path(root_msg_id): Path<String>,
    Query(q): Query<ThreadQuery>,
) -> Response {
    let profile = q.profile.filter(|p| !p.is_empty());
    if let Some(p) = &profile
        && !app.profiles.contains_key(p)
    {
        return message(
            StatusCode::NOT_FOUND,
            "Unknown profile",
            &format!("No profile is named {p}."),
        );
    }
    let thread = match load(&app, root_msg_id, profile).await {
        Ok(t) => t,
        Err(e) => return unavailable(&e),
    };
    if thread.events.is_empty() && thread.decisions.is_empty() {
        return message(
            StatusCode::NOT_FOUND,
            "No such thread",
            &format!(
                "Nothing is recorded under the root message {}.",
                thread.root_msg_id
            ),
        );
    }
    let body = render(&app, &thread, session.csrf());
    let title = format!("Thread {}", thread.root_msg_id);
    page(StatusCode::OK, &title, Some(session.csrf()), &body)
}

fn render(app: &AppState, t: &Thread, csrf: &str) -> Html {
    let mut body = Html::new();
    body.el("<h1>Thread <code>", &t.root_msg_id, "</code></h1>");
    body.raw("<nav class=\"profiles\">View: ");
    let all = format!("/ui/threads/{}", encode(&t.root_msg_id));
    link(&mut body, &all, "every profile", t.profile.is_none());
    let mut names: Vec<&String> = app.profiles.keys().collect();
    names.sort();
    for p in names {
        let href = format!("{all}?profile={}", encode(p));
        link(&mut body, &href, p, t.profile.as_ref() == Some(p));
    }
    body.raw("</nav>");
    body.html(&timeline::messages(t));
    body.html(&timeline::turns(t));
    body.html(&decision::section(t, csrf));
    body.html(&feed::section(t));
    body
}

fn link(body: &mut Html, href: &str, label: &str, current: bool) {
    body.raw(if current {
        "<a class=\"current\" href=\""
    } else {
        "<a href=\""
    })
    .text(href)
    .raw("\">")
    .text(label)
    .raw("</a> ");
}
