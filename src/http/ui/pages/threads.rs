//! `GET /ui/`: the threads said in recently, per profile.

use axum::{extract::State, http::StatusCode, response::Response};

use super::super::{
    html::{Html, encode, message, page, time},
    session::UiSession,
};
use crate::{http::AppState, store::ThreadSummary};

/// How far back the list looks.
const WINDOW_MS: i64 = 30 * 24 * 3600 * 1000;
/// How many threads it shows.
const LIMIT: i64 = 100;

/// The thread list.
pub async fn index(session: UiSession, State(app): State<AppState>) -> Response {
    let since = crate::util::UnixMs(app.clock.now().millis() - WINDOW_MS);
    let threads = match app.store.recent_threads(since, LIMIT).await {
        Ok(t) => t,
        Err(e) => return unavailable(&e),
    };
    let mut body = Html::new();
    body.raw("<h1>Recent threads</h1>");
    if threads.is_empty() {
        body.raw("<p class=\"empty\">No thread has been recorded in the last 30 days.</p>");
    }
    let mut profiles: Vec<&str> = threads.iter().map(|t| t.profile.as_str()).collect();
    profiles.sort_unstable();
    profiles.dedup();
    for profile in profiles {
        body.el("<h2>Profile ", profile, "</h2>");
        body.raw("<table class=\"threads\"><thead><tr><th>Thread</th><th>Chat</th>")
            .raw("<th>Last activity</th><th>Messages</th><th>Turns</th>")
            .raw("<th>Latest turn</th></tr></thead><tbody>");
        for t in threads.iter().filter(|t| t.profile == profile) {
            row(&mut body, t);
        }
        body.raw("</tbody></table>");
    }
    page(StatusCode::OK, "Threads", Some(session.csrf()), &body)
}

fn row(body: &mut Html, t: &ThreadSummary) {
    let href = format!(
        "/ui/threads/{}?profile={}",
        encode(&t.root_msg_id),
        encode(&t.profile)
    );
    body.raw("<tr><td><a class=\"thread\" href=\"")
        .text(&href)
        .raw("\">")
        .text(&t.root_msg_id)
        .raw("</a></td>")
        .el("<td>", &t.chat_id, "</td>")
        .el("<td>", &time(t.last_at.millis()), "</td>")
        .raw("<td>")
        .num(t.messages)
        .raw("</td><td>")
        .num(t.turns)
        .raw("</td>");
    match &t.latest_turn_state {
        Some(s) => {
            body.raw("<td><span class=\"state\">")
                .text(s)
                .raw("</span></td>");
        }
        None => {
            body.raw("<td>—</td>");
        }
    }
    body.raw("</tr>");
}

/// The page for a store that did not answer (the cause goes to the log only).
pub fn unavailable(e: &crate::store::StoreError) -> Response {
    tracing::error!(error = %e.reason(), "web view: the store did not answer");
    message(
        StatusCode::SERVICE_UNAVAILABLE,
        "Store unavailable",
        "The database did not answer; try again shortly.",
    )
}
