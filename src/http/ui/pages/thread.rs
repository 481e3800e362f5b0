//! `GET /ui/threads/{root_msg_id}`: one thread's timeline — its messages with their
//! verdicts, its turns, every context decision explained, and the batched feed and
//! digests of its sessions.

use std::collections::BTreeSet;

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
    threads::unavailable,
    timeline,
};
use crate::{
    context::report::Explanation,
    http::AppState,
    store::{
        DigestRow, FeedItemRow, FeedSegmentRow, StoreError, ThreadOf, TimelineEvent, TurnRow,
        VerdictRow,
    },
};

/// The newest decisions a page explains.
const DECISIONS: usize = 50;
/// The newest feed segments and digests shown per session.
const PER_SESSION: i64 = 20;

/// Whose view of the thread.
#[derive(Debug, Deserialize)]
pub struct ThreadQuery {
    /// One profile (default: every profile that recorded the thread).
    pub profile: Option<String>,
}

/// Everything the page shows.
pub struct Thread {
    pub root_msg_id: String,
    pub profile: Option<String>,
    pub events: Vec<TimelineEvent>,
    pub verdicts: Vec<VerdictRow>,
    pub turns: Vec<TurnRow>,
    pub decisions: Vec<Explanation>,
    /// Per session: (profile, session key, its segments with their items).
    pub feeds: Vec<SessionFeed>,
    pub digests: Vec<DigestRow>,
}

/// One session's batched feed.
pub struct SessionFeed {
    pub profile: String,
    pub session_key: String,
    pub segments: Vec<(FeedSegmentRow, Vec<FeedItemRow>)>,
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

/// Reads the thread.
pub async fn load(
    app: &AppState,
    root_msg_id: String,
    profile: Option<String>,
) -> Result<Thread, StoreError> {
    let store = app.store.as_ref();
    let of = ThreadOf {
        root_msg_id: &root_msg_id,
        profile: profile.as_deref(),
    };
    let events = store.timeline_events(of).await?;
    let verdicts = store.timeline_verdicts(of).await?;
    let turns = store.timeline_turns(of).await?;
    let refs = store.timeline_decisions(of).await?;
    let mut decisions = Vec::new();
    for d in refs.iter().rev().take(DECISIONS).rev() {
        let q = crate::explain::Query {
            profile: &d.profile,
            root_msg_id: &root_msg_id,
            message_id: None,
            decision_id: Some(d.id),
            verbose: true,
        };
        decisions.extend(crate::explain::load(store, &q).await?);
    }
    let sessions: BTreeSet<(String, String)> = turns
        .iter()
        .map(|t| (t.profile.clone(), t.session_key.clone()))
        .chain(
            decisions
                .iter()
                .map(|d| (d.profile.clone(), d.session_key.clone())),
        )
        .collect();
    let mut feeds = Vec::new();
    let mut digests = Vec::new();
    for (profile, key) in sessions {
        let mut segments = Vec::new();
        for s in store.session_segments(&profile, &key, PER_SESSION).await? {
            let items = store.segment_items(s.id).await?;
            segments.push((s, items));
        }
        if !segments.is_empty() {
            feeds.push(SessionFeed {
                profile: profile.clone(),
                session_key: key.clone(),
                segments,
            });
        }
        digests.extend(store.session_digests(&profile, &key, PER_SESSION).await?);
    }
    Ok(Thread {
        root_msg_id,
        profile,
        events,
        verdicts,
        turns,
        decisions,
        feeds,
        digests,
    })
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
