//! The daily digest as stored: one run per local date (claimed before any work), each
//! session's digest of it with its status, and per session the last event-log record a
//! digest covered.

use async_trait::async_trait;

use super::{ContextEventRow, SessionRow, StoreError};
use crate::util::UnixMs;

crate::util::spelled::spelled! {
    /// What started a run.
    pub enum DigestTrigger("digest trigger") {
        /// The daily schedule, inside its window.
        Schedule,
        /// `POST /digests/run`.
        Manual,
    }
}

crate::util::spelled::spelled! {
    /// Where a session's digest stands.
    pub enum DigestStatus("digest status") {
        /// Stored (and in the day's file); the session is reset next. A run that stopped
        /// here reset nothing.
        Written,
        /// Written, then the session was reset: a new session id, its history cleared.
        Reset,
        /// The session was left untouched; `reason` says why.
        Kept,
        /// Written, but resetting the session failed; it is untouched.
        ResetFailed,
    }
}

crate::util::spelled::spelled! {
    /// Why a digest has the status it has.
    pub enum DigestReason("digest reason") {
        /// Summarized.
        Summarized,
        /// Under the minimum length: reset without a summary.
        Short,
        /// The summarizer answered an error or could not be reached.
        SummarizerError,
        /// The summarizer did not answer in time.
        SummarizerTimeout,
        /// The summarizer answered an empty or blank summary.
        EmptySummary,
        /// The session's text could not be read from the event log.
        UnreadableTranscript,
        /// No API key for the summarizer (`FEISHU_BRIDGE_DIGEST_API_KEY`).
        NoApiKey,
        /// The day's digest file could not be written.
        FileWriteFailed,
        /// The session was gone when it was to be reset.
        SessionGone,
        /// The database refused or failed the reset.
        DatabaseError,
    }
}

/// A run to claim for its date.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewDigestRun {
    /// The local date, `YYYY-MM-DD`.
    pub date: String,
    pub trigger: DigestTrigger,
    /// The IANA zone the date is in.
    pub timezone: String,
    pub started_at: UnixMs,
}

/// A stored run.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct DigestRunRow {
    pub date: String,
    #[sqlx(rename = "started_by", try_from = "String")]
    pub trigger: DigestTrigger,
    pub timezone: String,
    pub started_at: UnixMs,
    /// `None` while it runs, or when it stopped before its end.
    pub finished_at: Option<UnixMs>,
    /// Sessions with content.
    pub sessions: i64,
    /// Sessions reset.
    pub reset: i64,
    /// Sessions kept untouched.
    pub kept: i64,
    /// Resets that failed.
    pub failed: i64,
    /// The digest file written, when a directory is configured and it was written.
    pub file: Option<String>,
}

/// A run's final counts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DigestRunEnd<'a> {
    pub date: &'a str,
    pub finished_at: UnixMs,
    pub sessions: i64,
    pub reset: i64,
    pub kept: i64,
    pub failed: i64,
    pub file: Option<&'a str>,
}

/// A session's digest to store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewDigest {
    pub date: String,
    pub profile: String,
    pub session_key: String,
    /// The session id it summarizes (the one a reset replaces).
    pub session_id: String,
    pub chat_id: String,
    /// Characters of the day's messages.
    pub chars: i64,
    /// The day's messages.
    pub messages: i64,
    /// The newest event-log record read.
    pub last_event_id: i64,
    pub summary: Option<String>,
    /// `written` or `kept`.
    pub status: DigestStatus,
    pub reason: DigestReason,
    /// What went wrong, for a person (never a secret).
    pub detail: Option<String>,
    pub now: UnixMs,
}

/// A stored digest.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct DigestRow {
    pub id: i64,
    pub date: String,
    pub profile: String,
    pub session_key: String,
    pub session_id: String,
    pub chat_id: String,
    pub chars: i64,
    pub messages: i64,
    pub last_event_id: i64,
    pub summary: Option<String>,
    #[sqlx(try_from = "String")]
    pub status: DigestStatus,
    #[sqlx(try_from = "String")]
    pub reason: DigestReason,
    pub detail: Option<String>,
    /// The session id after the reset.
    pub new_session_id: Option<String>,
    pub created_at: UnixMs,
    pub updated_at: UnixMs,
}

crate::util::spelled::spelled! {
    /// Where posting a digest stands (none: not tried yet).
    pub enum DigestPostStatus("digest post status") {
        /// Posted: never posted again.
        Posted,
        /// The post failed; a later pass retries it (a few attempts in all).
        Failed,
        /// Nowhere to post it (a chat without a workspace owner, a profile that cannot
        /// send): never tried again.
        Skipped,
    }
}

/// A reset session's digest, carried into the first turn of its new session.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct CarriedDigest {
    pub id: i64,
    /// The local date of the digest.
    pub date: String,
    pub summary: String,
    /// The first turn of the new session that succeeded (it was given the summary, which
    /// is in the session's history since); `None` while no turn has.
    pub first_turn: Option<String>,
}

/// Where posting a digest stands, as stored.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct DigestPostRow {
    pub id: i64,
    #[sqlx(try_from = "Option<String>")]
    pub post_status: OptionalPostStatus,
    pub post_attempts: i64,
    pub post_message_id: Option<String>,
    pub post_detail: Option<String>,
}

/// A post status column that may be empty (never tried).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OptionalPostStatus(pub Option<DigestPostStatus>);

impl TryFrom<Option<String>> for OptionalPostStatus {
    type Error = <DigestPostStatus as TryFrom<String>>::Error;

    fn try_from(v: Option<String>) -> Result<Self, Self::Error> {
        v.map(DigestPostStatus::try_from).transpose().map(Self)
    }
}

/// The outcome of one attempt to post a digest.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DigestPostMark<'a> {
    pub id: i64,
    pub status: DigestPostStatus,
    /// The message posted.
    pub message_id: Option<&'a str>,
    /// Why it failed or was skipped (never a secret).
    pub detail: Option<&'a str>,
    pub now: UnixMs,
}

/// What a session's day reads: its records after the last digest that reset it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TranscriptQuery<'a> {
    pub session: &'a SessionRow,
    /// The thread of a `thread:` session, whose records are all its own.
    pub thread_root: Option<&'a str>,
    /// The history scope of a shared session (`group:`), all of whose records are its.
    pub scope: Option<&'a str>,
}

/// The reset that follows a written digest.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DigestReset<'a> {
    pub digest_id: i64,
    pub reset: super::SessionReset<'a>,
    /// The newest record the digest covered: the next digest starts after it.
    pub last_event_id: i64,
}

/// The daily digest's runs, digests and marks.
#[async_trait]
pub trait DigestStore: Send + Sync + 'static {
    /// Claims `run.date`: `false` when that date already has a run (of this process or
    /// any other, finished or not).
    async fn claim_digest_run(&self, run: &NewDigestRun) -> Result<bool, StoreError>;
    /// Records a run's end.
    async fn finish_digest_run(&self, end: &DigestRunEnd<'_>) -> Result<(), StoreError>;
    /// The run of a date.
    async fn digest_run(&self, date: &str) -> Result<Option<DigestRunRow>, StoreError>;
    /// The latest run by start.
    async fn latest_digest_run(&self) -> Result<Option<DigestRunRow>, StoreError>;
    /// A session's records since the last digest that reset it (none of them recalled,
    /// commands left out), in said order.
    async fn digest_transcript(
        &self,
        q: &TranscriptQuery<'_>,
    ) -> Result<Vec<ContextEventRow>, StoreError>;
    /// Stores a run's digests in one transaction; their ids in order.
    async fn record_digests(&self, digests: &[NewDigest]) -> Result<Vec<i64>, StoreError>;
    /// Resets a digest's session in one transaction (a new session id, its history
    /// scope cleared, its feed cleared, its mark moved, the digest `reset`); `false`, with
    /// nothing changed, when the session (or the digest) is gone.
    async fn digest_reset(&self, r: &DigestReset<'_>) -> Result<bool, StoreError>;
    /// Sets a digest's status and reason (a `written` digest kept after all, or whose
    /// reset failed).
    async fn mark_digest(
        &self,
        id: i64,
        status: DigestStatus,
        reason: DigestReason,
        detail: Option<&str>,
        now: UnixMs,
    ) -> Result<(), StoreError>;
    /// A date's digests, by profile and session key.
    async fn digests_of(&self, date: &str) -> Result<Vec<DigestRow>, StoreError>;
    /// The digest with a summary that reset the session `key` into its current session
    /// id, and the first turn of that id that succeeded (while none has, the next turn
    /// carries the summary).
    async fn carried_digest(
        &self,
        profile: &str,
        key: &str,
    ) -> Result<Option<CarriedDigest>, StoreError>;
    /// Digests with a summary, created at or after `since`, that were written (reset or
    /// not) and are not posted, skipped, nor failed `max_attempts` times; oldest first.
    async fn digests_to_post(
        &self,
        since: UnixMs,
        max_attempts: i64,
    ) -> Result<Vec<DigestRow>, StoreError>;
    /// Records an attempt to post a digest (counting it).
    async fn mark_digest_post(&self, mark: &DigestPostMark<'_>) -> Result<(), StoreError>;
    /// Where posting a date's digests stands, by id.
    async fn digest_posts(&self, date: &str) -> Result<Vec<DigestPostRow>, StoreError>;
}
