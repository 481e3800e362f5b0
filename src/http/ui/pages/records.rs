//! What a thread page shows, read from the store and the explain module.

use std::collections::BTreeSet;

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
