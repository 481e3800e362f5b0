//! What-if explain in the browser: the form under each decision, and
//! `POST /ui/threads/{root_msg_id}/what-if`, which re-runs that decision's selection
//! under the settings given (no agent is called) and shows the difference.

use axum::{
    Form,
    extract::{Path, State},
    http::StatusCode,
    response::Response,
};
use serde::Deserialize;

use super::{
    super::{
        html::{Html, csrf_field, encode, message, page},
        session::{UiSession, forbidden},
    },
    threads::unavailable,
    what_if_view as view,
};
use crate::{context::report::Explanation, explain::Overrides, http::AppState};

/// The form as posted; an empty field keeps the recorded setting.
#[derive(Debug, Default, Deserialize)]
pub struct WhatIfForm {
    #[serde(default)]
    pub csrf: String,
    #[serde(default)]
    pub profile: String,
    #[serde(default)]
    pub decision_id: String,
    #[serde(default)]
    pub thread_context_limit: String,
    #[serde(default)]
    pub max_context_chars: String,
    #[serde(default)]
    pub max_agent_output_chars: String,
    #[serde(default)]
    pub shared_thread_enabled: String,
    #[serde(default)]
    pub group_chat_history_share: String,
    #[serde(default)]
    pub workspace_mode: String,
}

impl WhatIfForm {
    /// The overrides as `key=value` pairs, the filled fields only.
    pub fn pairs(&self) -> Vec<String> {
        [
            ("thread_context_limit", &self.thread_context_limit),
            ("max_context_chars", &self.max_context_chars),
            ("max_agent_output_chars", &self.max_agent_output_chars),
            ("shared_thread_enabled", &self.shared_thread_enabled),
            ("group_chat_history_share", &self.group_chat_history_share),
            ("workspace_mode", &self.workspace_mode),
        ]
        .into_iter()
        .filter(|(_, v)| !v.trim().is_empty())
        .map(|(k, v)| format!("{k}={}", v.trim()))
        .collect()
    }
}

/// The form under a decision.
pub fn form(root_msg_id: &str, e: &Explanation, csrf: &str) -> Html {
    let action = format!("/ui/threads/{}/what-if", encode(root_msg_id));
    let mut h = Html::new();
    h.raw("<details class=\"what-if\"><summary>What if… (re-run this selection under other settings)</summary>")
        .raw("<form method=\"post\" class=\"what-if\" action=\"")
        .text(&action)
        .raw("\">")
        .html(&csrf_field(csrf))
        .raw("<input type=\"hidden\" name=\"profile\" value=\"")
        .text(&e.profile)
        .raw("\"><input type=\"hidden\" name=\"decision_id\" value=\"")
        .num(e.decision_id)
        .raw("\">");
    number(
        &mut h,
        "thread_context_limit",
        "Thread items (thread_context_limit)",
    );
    number(
        &mut h,
        "max_context_chars",
        "Context characters (max_context_chars)",
    );
    number(
        &mut h,
        "max_agent_output_chars",
        "Agent output characters (max_agent_output_chars)",
    );
    switch(
        &mut h,
        "shared_thread_enabled",
        "Thread context (shared_thread_enabled)",
    );
    switch(
        &mut h,
        "group_chat_history_share",
        "History share (group_chat_history_share)",
    );
    h.raw("<label>Workspace mode <select name=\"workspace_mode\">")
        .raw("<option value=\"\">as recorded</option><option value=\"shared\">shared</option>")
        .raw("<option value=\"owner_only\">owner_only</option></select></label>")
        .raw("<button type=\"submit\">Show the difference</button></form></details>");
    h
}

fn number(h: &mut Html, name: &'static str, label: &'static str) {
    h.raw("<label>")
        .raw(label)
        .raw(" <input type=\"number\" min=\"0\" name=\"")
        .raw(name)
        .raw("\" placeholder=\"as recorded\"></label>");
}

fn switch(h: &mut Html, name: &'static str, label: &'static str) {
    h.raw("<label>")
        .raw(label)
        .raw(" <select name=\"")
        .raw(name)
        .raw("\"><option value=\"\">as recorded</option><option value=\"true\">on</option>")
        .raw("<option value=\"false\">off</option></select></label>");
}

/// `POST /ui/threads/{root_msg_id}/what-if`.
pub async fn run(
    session: UiSession,
    State(app): State<AppState>,
    Path(root_msg_id): Path<String>,
    Form(f): Form<WhatIfForm>,
) -> Response {
    if !session.check(&f.csrf) {
        return forbidden();
    }
    let Ok(decision_id) = f.decision_id.trim().parse::<i64>() else {
        return message(
            StatusCode::BAD_REQUEST,
            "Bad request",
            "The form names no decision.",
        );
    };
    if !app.profiles.contains_key(&f.profile) {
        return message(
            StatusCode::NOT_FOUND,
            "Unknown profile",
            &format!("No profile is named {}.", f.profile),
        );
    }
    let overrides = match Overrides::parse(&f.pairs()) {
        Ok(o) => o,
        Err(why) => return message(StatusCode::BAD_REQUEST, "Bad settings", &why),
    };
    let q = crate::explain::Query {
        profile: &f.profile,
        root_msg_id: &root_msg_id,
        message_id: None,
        decision_id: Some(decision_id),
        verbose: false,
    };
    let found = crate::explain::what_if(app.store.as_ref(), &q, &overrides, &app.config).await;
    match found {
        Ok(Some(w)) => {
            let body = view::render(&w);
            let title = format!("What if · decision {decision_id}");
            page(StatusCode::OK, &title, Some(session.csrf()), &body)
        }
        Ok(None) => message(StatusCode::NOT_FOUND, "No such decision", &q.not_found()),
        Err(e) => unavailable(&e),
    }
}
