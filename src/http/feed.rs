//! `GET /feed` and `POST /feed/flush`: one session's batched feed, and packing it now
//! (one session's, or every session's of a profile).

use axum::Json;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use super::{Admin, AdminErrors, ApiError, AppState, ErrorBody, extract::Query, profile_or_first};
use crate::{
    feed::render,
    store::{FeedItemRow, FeedSegmentRow},
};

/// Which session's feed.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct FeedQuery {
    /// Profile; defaults to the first configured profile.
    pub profile: Option<String>,
    /// e.g. `group:oc_xxx` or `thread:oc_xxx:om_xxx`, or a chat's own feed key
    /// `chat:oc_xxx`.
    pub session_key: String,
}

/// Which feed to flush: one session's, or every session's of the profile.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct FlushQuery {
    /// Profile; defaults to the first configured profile.
    pub profile: Option<String>,
    /// e.g. `group:oc_xxx`; without it, every session of the profile with messages
    /// gathered or segments waiting is flushed.
    pub session_key: Option<String>,
}

/// A gathered message.
#[derive(Debug, Serialize, ToSchema)]
pub struct FeedItemBody {
    pub message_id: String,
    pub sender: String,
    pub text: String,
    /// Unix ms it was said.
    pub said_at: i64,
    /// Unix ms the bridge gathered it.
    pub gathered_at: i64,
}

impl From<FeedItemRow> for FeedItemBody {
    fn from(r: FeedItemRow) -> Self {
        Self {
            message_id: r.message_id,
            sender: r.sender,
            text: r.text,
            said_at: r.said_at.millis(),
            gathered_at: r.gathered_at.millis(),
        }
    }
}

/// A packed segment.
#[derive(Debug, Serialize, ToSchema)]
pub struct FeedSegmentBody {
    pub id: i64,
    /// `waiting`, `attached`, `read` or `cleared`.
    pub state: &'static str,
    /// Messages packed into it.
    pub items: i64,
    /// Their characters, senders included.
    pub chars: i64,
    /// Unix ms.
    pub packed_at: i64,
    /// The session id it was attached under.
    pub session_id: Option<String>,
    pub attached_at: Option<i64>,
    pub read_at: Option<i64>,
    /// The turn that used it.
    pub read_by_turn: Option<String>,
    /// Its text as the agent reads it (messages recalled since are left out).
    pub text: String,
}

/// `GET /feed`.
#[derive(Debug, Serialize, ToSchema)]
pub struct FeedBody {
    pub profile: String,
    pub session_key: String,
    /// Whether the profile's feed is on in the session's chat (a session that was never
    /// answered has no chat to tell: `null`).
    pub enabled: Option<bool>,
    /// Messages gathered, not yet packed, oldest first.
    pub gathered: Vec<FeedItemBody>,
    /// Segments, oldest first.
    pub segments: Vec<FeedSegmentBody>,
}

/// `POST /feed/flush`.
#[derive(Debug, Serialize, ToSchema)]
pub struct FlushBody {
    /// The segment packed, when one session was flushed and it had gathered anything
    /// (a flush of the whole profile: `null`, see `sessions`).
    pub packed: Option<i64>,
    /// Segments attached now, of every session flushed (at most
    /// `feed.max_unread_segments` stay unread per session).
    pub attached: Vec<i64>,
    /// Each session flushed, by key: the one named, or every one of the profile with
    /// messages gathered or segments waiting.
    pub sessions: Vec<FlushedSessionBody>,
}

/// What the flush did to one session.
#[derive(Debug, Serialize, ToSchema)]
pub struct FlushedSessionBody {
    pub session_key: String,
    /// The segment packed, when anything was gathered.
    pub packed: Option<i64>,
    /// Segments attached now.
    pub attached: Vec<i64>,
}

/// One session's batched feed: what it gathered, its segments and their state.
#[utoipa::path(get, path = "/feed", tag = "feed", security(("bearer" = [])),
    params(FeedQuery),
    responses(
        (status = 200, description = "The session's feed", body = FeedBody),
        AdminErrors,
        (status = 404, description = "`unknown_profile`", body = ErrorBody),
        (status = 503, description = "`store_unavailable`", body = ErrorBody),
    ))]
pub async fn show(
    Admin(app): Admin,
    Query(q): Query<FeedQuery>,
) -> Result<Json<FeedBody>, ApiError> {
    let profile = profile_or_first(&app, q.profile)?;
    let feed = app
        .store
        .session_feed(&profile, &q.session_key)
        .await
        .map_err(ApiError::store)?;
    let mut segments = Vec::with_capacity(feed.segments.len());
    for s in feed.segments {
        segments.push(segment(&app, s).await?);
    }
    let chat = feed.gathered.first().map(|i| i.chat_id.clone()).or(app
        .store
        .session(&profile, &q.session_key)
        .await
        .map_err(ApiError::store)?
        .map(|s| s.chat_id));
    let enabled = match (app.config.profile(&profile), chat) {
        (Some(p), Some(chat)) => Some(app.config.feed_enabled(p, &chat)),
        _ => None,
    };
    Ok(Json(FeedBody {
        profile,
        session_key: q.session_key,
        enabled,
        gathered: feed.gathered.into_iter().map(FeedItemBody::from).collect(),
        segments,
    }))
}

/// Packs the session's gathered messages now, whatever their number or age, and
/// attaches what the unread limit allows; without `session_key`, does so for every
/// session of the profile with messages gathered or segments waiting.
#[utoipa::path(post, path = "/feed/flush", tag = "feed", security(("bearer" = [])),
    params(FlushQuery),
    responses(
        (status = 200, description = "What was packed and attached", body = FlushBody),
        AdminErrors,
        (status = 404, description = "`unknown_profile`", body = ErrorBody),
        (status = 503, description = "`store_unavailable`", body = ErrorBody),
    ))]
pub async fn flush(
    Admin(app): Admin,
    Query(q): Query<FlushQuery>,
) -> Result<Json<FlushBody>, ApiError> {
    let profile = profile_or_first(&app, q.profile)?;
    let one_session = q.session_key.is_some();
    let done = match q.session_key {
        Some(key) => {
            let one = app
                .feed
                .flush(&profile, &key)
                .await
                .map_err(ApiError::store)?;
            vec![(key, one)]
        }
        None => app
            .feed
            .flush_profile(&profile)
            .await
            .map_err(ApiError::store)?,
    };
    let packed = match done.as_slice() {
        [(_, one)] if one_session => one.packed,
        _ => None,
    };
    let attached = done
        .iter()
        .flat_map(|(_, f)| f.attached.iter().copied())
        .collect();
    Ok(Json(FlushBody {
        packed,
        attached,
        sessions: done
            .into_iter()
            .map(|(session_key, f)| FlushedSessionBody {
                session_key,
                packed: f.packed,
                attached: f.attached,
            })
            .collect(),
    }))
}

async fn segment(app: &AppState, s: FeedSegmentRow) -> Result<FeedSegmentBody, ApiError> {
    let items = app
        .store
        .segment_items(s.id)
        .await
        .map_err(ApiError::store)?;
    let items = render::named(Some(&app.names), &s.profile, items).await;
    Ok(FeedSegmentBody {
        id: s.id,
        state: s.state.as_str(),
        items: s.items,
        chars: s.chars,
        packed_at: s.packed_at.millis(),
        session_id: s.session_id,
        attached_at: s.attached_at.map(|t| t.millis()),
        read_at: s.read_at.map(|t| t.millis()),
        read_by_turn: s.read_by_turn,
        text: render::segment_text(&items, app.config.feed.segment_chars),
    })
}
