//! `POST /digests/run` and `GET /digests`: run today's daily digest now, and read a
//! date's digests.

use std::time::Duration;

use axum::{Json, http::StatusCode};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use super::{Admin, AdminErrors, ApiError, ErrorBody, extract::Query};
use crate::{
    digest::{Outcome, file},
    store::{DigestPostRow, DigestRow, DigestRunRow, Store},
};

/// Which date.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct DigestsQuery {
    /// `YYYY-MM-DD` in `digest.timezone`; default: the latest run's date.
    #[param(format = Date)]
    pub date: Option<String>,
}

/// A run of the daily digest.
#[derive(Debug, Serialize, ToSchema)]
pub struct RunBody {
    /// Its local date, `YYYY-MM-DD`.
    pub date: String,
    /// `schedule` or `manual`.
    pub trigger: &'static str,
    /// The IANA time zone of the date.
    pub timezone: String,
    /// Unix ms.
    pub started_at: i64,
    /// Unix ms; `null` while it runs, or when it stopped before its end (the date is not
    /// run again).
    pub finished_at: Option<i64>,
    pub duration_ms: Option<i64>,
    /// Sessions with something said since their last digest.
    pub sessions: i64,
    /// Sessions reset.
    pub reset: i64,
    /// Sessions kept untouched.
    pub kept: i64,
    /// Resets that failed (those sessions are untouched too).
    pub failed: i64,
    /// The digest file, when `digest.dir` is set and it was written.
    pub file: Option<String>,
}

impl From<&DigestRunRow> for RunBody {
    fn from(r: &DigestRunRow) -> Self {
        Self {
            date: r.date.clone(),
            trigger: r.trigger.as_str(),
            timezone: r.timezone.clone(),
            started_at: r.started_at.millis(),
            finished_at: r.finished_at.map(|t| t.millis()),
            duration_ms: r.finished_at.map(|t| t.millis() - r.started_at.millis()),
            sessions: r.sessions,
            reset: r.reset,
            kept: r.kept,
            failed: r.failed,
            file: r.file.clone(),
        }
    }
}

/// One session's digest.
#[derive(Debug, Serialize, ToSchema)]
pub struct DigestBody {
    pub id: i64,
    pub profile: String,
    pub session_key: String,
    /// The session id it summarizes.
    pub session_id: String,
    pub chat_id: String,
    /// `written` (reset next), `reset`, `kept` or `reset_failed`.
    pub status: &'static str,
    /// `summarized`, `short`, `summarizer_error`, `summarizer_timeout`, `empty_summary`,
    /// `unreadable_transcript`, `no_api_key`, `file_write_failed`, `session_gone` or
    /// `database_error`.
    pub reason: &'static str,
    /// The status in words, as the digest file says it.
    pub status_text: String,
    /// What went wrong, when something did.
    pub detail: Option<String>,
    pub summary: Option<String>,
    /// Messages and their characters since the session's last digest.
    pub messages: i64,
    pub chars: i64,
    /// The session id after the reset.
    pub new_session_id: Option<String>,
    /// Unix ms.
    pub created_at: i64,
    pub updated_at: i64,
    /// Where posting it stands (`digest.post`); `null` when it was never tried (posting
    /// off, nothing to post, or not yet).
    pub post: Option<PostBody>,
}

/// Where posting a digest stands.
#[derive(Debug, Serialize, ToSchema)]
pub struct PostBody {
    /// `posted`, `failed` (a later pass tries again, 5 attempts in all) or `skipped`
    /// (nowhere to post it: a chat without a workspace owner, a profile that cannot send).
    pub status: &'static str,
    pub attempts: i64,
    /// The message posted.
    pub message_id: Option<String>,
    /// Why it failed or was skipped.
    pub detail: Option<String>,
}

impl DigestBody {
    /// The body of `d`, with where posting it stands.
    fn with_post(d: &DigestRow, posts: &[DigestPostRow]) -> Self {
        let post = posts.iter().find(|p| p.id == d.id).and_then(|p| {
            p.post_status.0.map(|status| PostBody {
                status: status.as_str(),
                attempts: p.post_attempts,
                message_id: p.post_message_id.clone(),
                detail: p.post_detail.clone(),
            })
        });
        Self {
            post,
            ..Self::from(d)
        }
    }
}

/// The bodies of a date's digests, with where posting each stands.
async fn bodies(
    store: &dyn Store,
    date: &str,
    digests: &[DigestRow],
) -> Result<Vec<DigestBody>, ApiError> {
    let posts = store.digest_posts(date).await.map_err(ApiError::store)?;
    Ok(digests
        .iter()
        .map(|d| DigestBody::with_post(d, &posts))
        .collect())
}

impl From<&DigestRow> for DigestBody {
    fn from(d: &DigestRow) -> Self {
        Self {
            id: d.id,
            profile: d.profile.clone(),
            session_key: d.session_key.clone(),
            session_id: d.session_id.clone(),
            chat_id: d.chat_id.clone(),
            status: d.status.as_str(),
            reason: d.reason.as_str(),
            status_text: file::status_line(d),
            detail: d.detail.clone(),
            summary: d.summary.clone(),
            messages: d.messages,
            chars: d.chars,
            new_session_id: d.new_session_id.clone(),
            created_at: d.created_at.millis(),
            updated_at: d.updated_at.millis(),
            post: None,
        }
    }
}

/// `GET /digests` and `POST /digests/run`.
#[derive(Debug, Serialize, ToSchema)]
pub struct DigestsBody {
    /// The date; `null` when no digest ever ran.
    pub date: Option<String>,
    /// `ran` or `running` (for `POST /digests/run`); `null` for `GET`.
    pub outcome: Option<&'static str>,
    /// Its run; `null` when the date has none.
    pub run: Option<RunBody>,
    /// Its digests, by profile and session key.
    pub digests: Vec<DigestBody>,
}

/// Runs today's digest now, whatever the time; still once per date. Answers when it
/// finished, or 202 while it still runs after half of `server.request_timeout_secs`
/// (`GET /digests` then shows it).
#[utoipa::path(post, path = "/digests/run", tag = "digest", security(("bearer" = [])),
    responses(
        (status = 200, description = "It ran: the run and its digests", body = DigestsBody),
        (status = 202, description = "It runs on; `GET /digests` shows it", body = DigestsBody),
        AdminErrors,
        (status = 409, description = "`digest_disabled`, `digest_already_ran` (the date ran before, finished or not) or `nothing_to_digest` (no profile configured)", body = ErrorBody),
        (status = 503, description = "`store_unavailable`: nothing was recorded", body = ErrorBody),
    ))]
pub async fn run(Admin(app): Admin) -> Result<(StatusCode, Json<DigestsBody>), ApiError> {
    if !app.config.digest.enabled {
        return Err(ApiError::Conflict(
            "digest_disabled",
            "the daily digest is off: set [digest] enabled = true".into(),
        ));
    }
    let digest = app.digest.clone();
    let date = digest.today();
    // Its own task: a client that goes away does not stop a run half-way.
    let task = tokio::spawn(async move { digest.run_now().await });
    let wait = Duration::from_secs(app.config.server.request_timeout_secs) / 2;
    let Ok(done) = tokio::time::timeout(wait, task).await else {
        return Ok((
            StatusCode::ACCEPTED,
            Json(DigestsBody {
                date: Some(date),
                outcome: Some("running"),
                run: None,
                digests: Vec::new(),
            }),
        ));
    };
    let outcome = done
        .map_err(|_| ApiError::Framework(StatusCode::INTERNAL_SERVER_ERROR))?
        .map_err(ApiError::store)?;
    match outcome {
        Outcome::Ran { run, digests } => Ok((
            StatusCode::OK,
            Json(DigestsBody {
                date: Some(run.date.clone()),
                outcome: Some("ran"),
                digests: bodies(&*app.store, &run.date, &digests).await?,
                run: Some(RunBody::from(&run)),
            }),
        )),
        Outcome::AlreadyRan { date } => Err(ApiError::Conflict(
            "digest_already_ran",
            format!("the digest of {date} already ran; a date runs once"),
        )),
        Outcome::NothingToSee { why } => Err(ApiError::Conflict(
            "nothing_to_digest",
            format!("nothing to digest: {why}"),
        )),
        Outcome::OutsideWindow { .. } | Outcome::NotDue => {
            Err(ApiError::Framework(StatusCode::INTERNAL_SERVER_ERROR))
        }
    }
}

/// A date's run and digests, read from the database.
#[utoipa::path(get, path = "/digests", tag = "digest", security(("bearer" = [])),
    params(DigestsQuery),
    responses(
        (status = 200, description = "The date's run and digests", body = DigestsBody),
        AdminErrors,
        (status = 503, description = "`store_unavailable`", body = ErrorBody),
    ))]
pub async fn list(
    Admin(app): Admin,
    Query(q): Query<DigestsQuery>,
) -> Result<Json<DigestsBody>, ApiError> {
    let run = match &q.date {
        Some(date) => {
            if !is_date(date) {
                return Err(ApiError::BadRequest(
                    "date: expected YYYY-MM-DD, e.g. 2026-12-02".into(),
                ));
            }
            app.store.digest_run(date).await
        }
        None => app.store.latest_digest_run().await,
    }
    .map_err(ApiError::store)?;
    let date = q.date.or_else(|| run.as_ref().map(|r| r.date.clone()));
    let digests = match &date {
        Some(d) => {
            let rows = app.store.digests_of(d).await.map_err(ApiError::store)?;
            bodies(&*app.store, d, &rows).await?
        }
        None => Vec::new(),
    };
    Ok(Json(DigestsBody {
        date,
        outcome: None,
        run: run.as_ref().map(RunBody::from),
        digests,
    }))
}

/// `YYYY-MM-DD`, a real date.
fn is_date(s: &str) -> bool {
    s.len() == 10 && s.parse::<jiff::civil::Date>().is_ok()
}

#[cfg(test)]
mod tests {
    #[test]
    fn dates_are_checked() {
        assert!(super::is_date("2026-12-02"));
        for bad in ["2026-13-01", "2026-2-1", "yesterday", "2026-12-02T00:00"] {
            assert!(!super::is_date(bad), "{bad}");
        }
    }
}
