//! One run of the daily digest, step by step: claim the date, digest each session with
//! something said, write every digest (database, then the day's file), reset the
//! sessions whose digest was written, and say how it ended.

use std::collections::HashMap;

use super::{Digest, Outcome, Stage, file, schedule::Local, transcript::Transcript};
use crate::{
    store::{
        DigestReason, DigestReset, DigestRow, DigestRunEnd, DigestStatus, DigestTrigger, NewDigest,
        NewDigestRun, SessionReset, SessionRow, StoreError, TranscriptQuery,
    },
    util::{UnixMs, new_session_id},
};

/// A session with fewer characters said than this is reset without a summary.
pub const MIN_CHARS: usize = 40;

pub(super) struct Run<'a> {
    d: &'a Digest,
    trigger: DigestTrigger,
    now: UnixMs,
    date: String,
}

impl<'a> Run<'a> {
    pub(super) fn new(d: &'a Digest, trigger: DigestTrigger) -> Self {
        let now = d.clock.now();
        let date = Local::of(now, &d.config.digest.tz()).date;
        Self {
            d,
            trigger,
            now,
            date,
        }
    }

    pub(super) async fn go(self, stage: Stage) -> Result<Outcome, StoreError> {
        if self.d.config.profiles.is_empty() {
            return Ok(Outcome::NothingToSee {
                why: "no profile is configured",
            });
        }
        // Read before the date is claimed: a store that is down records no date.
        let sessions = self.configured_sessions().await?;
        if !self.claim(&sessions).await? {
            return Ok(Outcome::AlreadyRan { date: self.date });
        }
        let mut digests = Vec::new();
        for s in &sessions {
            if let Some(digest) = self.digest_of(s).await {
                digests.push(digest);
            }
        }
        self.d.store.record_digests(&digests).await?;
        let mut rows = self.d.store.digests_of(&self.date).await?;
        let file = self.write_file(&mut rows).await;
        if stage == Stage::Written {
            return self.outcome().await;
        }
        self.reset_written(&sessions, &mut rows).await;
        let file = match file {
            // The file was written before the resets; now it says how they went.
            Some(path) => self.rewrite(&path, &rows).await.then_some(path),
            None => None,
        };
        self.finish(&rows, file.as_deref()).await?;
        // After the resets: a post that fails holds nothing up.
        if let Err(e) = self.d.post_pending().await {
            tracing::warn!(reason = %e.reason(), "the digests could not be posted; a later look tries again");
        }
        let outcome = self.outcome().await?;
        if let Outcome::Ran { run, .. } = &outcome {
            tracing::info!(
                date = %run.date,
                sessions = run.sessions,
                reset = run.reset,
                kept = run.kept,
                failed = run.failed,
                "daily digest finished"
            );
        }
        Ok(outcome)
    }

    /// Every session of a configured profile that the digest takes: not one of a
    /// profile or workspace with `digest = false`, nor a direct-message one unless
    /// `digest.include_dms`. The others are neither summarized nor reset.
    async fn configured_sessions(&self) -> Result<Vec<SessionRow>, StoreError> {
        let config = &self.d.config;
        Ok(self
            .d
            .store
            .sessions(None, None)
            .await?
            .into_iter()
            .filter(|s| {
                config
                    .profile(&s.profile)
                    .is_some_and(|p| config.digest_takes(p, &s.chat_id, s.chat_type))
            })
            .collect())
    }

    /// Claims the date for this run; `false` when it already ran.
    async fn claim(&self, sessions: &[SessionRow]) -> Result<bool, StoreError> {
        let claimed = self
            .d
            .store
            .claim_digest_run(&NewDigestRun {
                date: self.date.clone(),
                trigger: self.trigger,
                timezone: self.d.config.digest.timezone_name().to_string(),
                started_at: self.now,
            })
            .await?;
        if claimed {
            tracing::info!(date = %self.date, trigger = self.trigger.as_str(), sessions = sessions.len(), "daily digest started");
        } else {
            tracing::info!(date = %self.date, "the daily digest of this date already ran");
        }
        Ok(claimed)
    }

    /// Resets the session of every digest that was written.
    async fn reset_written(&self, sessions: &[SessionRow], rows: &mut [DigestRow]) {
        let by_key: HashMap<(&str, &str), &SessionRow> = sessions
            .iter()
            .map(|s| ((s.profile.as_str(), s.session_key.as_str()), s))
            .collect();
        for row in rows.iter_mut() {
            if row.status == DigestStatus::Written {
                let session = by_key.get(&(row.profile.as_str(), row.session_key.as_str()));
                self.reset(row, session.copied()).await;
            }
        }
    }

    /// Records the run's end: how many sessions were reset, kept or failed, and its file.
    async fn finish(
        &self,
        rows: &[DigestRow],
        file: Option<&std::path::Path>,
    ) -> Result<(), StoreError> {
        let count = |s: DigestStatus| rows.iter().filter(|r| r.status == s).count() as i64;
        let path = file.map(|p| p.display().to_string());
        self.d
            .store
            .finish_digest_run(&DigestRunEnd {
                date: &self.date,
                finished_at: self.d.clock.now(),
                sessions: rows.len() as i64,
                reset: count(DigestStatus::Reset),
                kept: count(DigestStatus::Kept),
                failed: count(DigestStatus::ResetFailed),
                file: path.as_deref(),
            })
            .await
    }

    /// The run and its digests, as stored.
    async fn outcome(&self) -> Result<Outcome, StoreError> {
        let store = &self.d.store;
        let Some(run) = store.digest_run(&self.date).await? else {
            return Ok(Outcome::AlreadyRan {
                date: self.date.clone(),
            });
        };
        let digests = store.digests_of(&self.date).await?;
        Ok(Outcome::Ran { run, digests })
    }

    /// A session's digest, `None` when nothing was said in it since its last one.
    async fn digest_of(&self, s: &SessionRow) -> Option<NewDigest> {
        let d = self.d;
        let key = s.session_key.as_str();
        let q = TranscriptQuery {
            session: s,
            thread_root: key
                .starts_with("thread:")
                .then_some(s.root_msg_id.as_deref())
                .flatten(),
            scope: key
                .starts_with("group:")
                .then_some(s.history_scope.as_str()),
        };
        let mut digest = NewDigest {
            date: self.date.clone(),
            profile: s.profile.clone(),
            session_key: s.session_key.clone(),
            session_id: s.session_id.clone(),
            chat_id: s.chat_id.clone(),
            chars: 0,
            messages: 0,
            last_event_id: 0,
            summary: None,
            status: DigestStatus::Kept,
            reason: DigestReason::UnreadableTranscript,
            detail: None,
            now: self.now,
        };
        let rows = match d.store.digest_transcript(&q).await {
            Ok(rows) => rows,
            Err(e) => {
                tracing::warn!(profile = %s.profile, session_key = key, reason = %e.reason(), "a session's text could not be read; it is kept");
                digest.detail = Some(e.reason());
                return Some(digest);
            }
        };
        let senders = d.sender_names(&s.profile, &rows).await;
        let t = Transcript::named(&rows, &d.config.digest.tz(), &senders);
        if t.is_empty() {
            return None;
        }
        digest.chars = t.chars as i64;
        digest.messages = t.messages as i64;
        digest.last_event_id = t.last_event_id;
        let (status, reason, summary, detail) = if t.chars < MIN_CHARS {
            (DigestStatus::Written, DigestReason::Short, None, None)
        } else if !d.summarizer.has_key() {
            let detail = "set FEISHU_BRIDGE_DIGEST_API_KEY".to_string();
            (
                DigestStatus::Kept,
                DigestReason::NoApiKey,
                None,
                Some(detail),
            )
        } else {
            match d.summarizer.summarize(&t.text).await {
                Ok(summary) => (
                    DigestStatus::Written,
                    DigestReason::Summarized,
                    Some(summary),
                    None,
                ),
                Err(f) => {
                    tracing::warn!(profile = %s.profile, session_key = key, reason = f.reason.as_str(), "no summary; the session is kept");
                    (DigestStatus::Kept, f.reason, None, Some(f.detail))
                }
            }
        };
        digest.status = status;
        digest.reason = reason;
        digest.summary = summary;
        digest.detail = detail;
        Some(digest)
    }

    /// The day's file as it reads now, chats by name.
    async fn file_text(&self, rows: &[DigestRow]) -> String {
        let chats = self.d.chat_names(rows).await;
        file::render_named(
            &self.date,
            self.d.config.digest.timezone_name(),
            rows,
            &chats,
        )
    }

    /// Writes the day's file, when a directory is configured: its path. When it cannot
    /// be written, every digest that was to reset its session keeps it instead.
    async fn write_file(&self, rows: &mut [DigestRow]) -> Option<std::path::PathBuf> {
        let dir = self.d.config.digest.dir.as_ref()?;
        let path = file::path(dir, &self.date);
        let text = self.file_text(rows).await;
        let Err(why) = file::write(path.clone(), text).await else {
            return Some(path);
        };
        tracing::error!(error = %why, "the digest file could not be written; no session is reset");
        for row in rows.iter_mut() {
            if row.status == DigestStatus::Written {
                row.status = DigestStatus::Kept;
                row.reason = DigestReason::FileWriteFailed;
                row.detail = Some(why.clone());
                self.mark(row).await;
            }
        }
        None
    }

    /// Rewrites the day's file with how the resets went; whether it could.
    async fn rewrite(&self, path: &std::path::Path, rows: &[DigestRow]) -> bool {
        let text = self.file_text(rows).await;
        match file::write(path.to_path_buf(), text).await {
            Ok(()) => true,
            Err(why) => {
                tracing::warn!(error = %why, "the digest file could not be updated with the resets; the database has them");
                false
            }
        }
    }

    /// Resets a written digest's session; a reset that fails is recorded as such.
    async fn reset(&self, row: &mut DigestRow, session: Option<&SessionRow>) {
        let fresh = new_session_id();
        let now = self.d.clock.now();
        let outcome = match session {
            None => Ok(false),
            Some(s) => {
                let r = DigestReset {
                    digest_id: row.id,
                    reset: SessionReset {
                        profile: &s.profile,
                        key: &s.session_key,
                        history_scope: &s.history_scope,
                        new_session_id: &fresh,
                        now,
                    },
                    last_event_id: row.last_event_id,
                };
                self.d.store.digest_reset(&r).await
            }
        };
        match outcome {
            Ok(true) => {
                row.status = DigestStatus::Reset;
                row.new_session_id = Some(fresh);
                return;
            }
            Ok(false) => {
                row.reason = DigestReason::SessionGone;
                row.detail = Some("the session no longer exists".into());
            }
            Err(e) => {
                row.reason = DigestReason::DatabaseError;
                row.detail = Some(e.reason());
            }
        }
        tracing::warn!(profile = %row.profile, session_key = %row.session_key, reason = row.reason.as_str(), "a digest's session could not be reset; it is untouched");
        row.status = DigestStatus::ResetFailed;
        self.mark(row).await;
    }

    async fn mark(&self, row: &DigestRow) {
        let now = self.d.clock.now();
        if let Err(e) = self
            .d
            .store
            .mark_digest(row.id, row.status, row.reason, row.detail.as_deref(), now)
            .await
        {
            tracing::warn!(reason = %e.reason(), digest_id = row.id, "a digest's status could not be recorded");
        }
    }
}
