//! Posting the digests (`digest.post`): after a run's resets, and again on every look at
//! the schedule, each written digest with a summary not yet posted goes to its chat
//! (`chat`) or, as a private message, to the owner of its chat's workspace (`owner`),
//! through the Open API and its call budget.
//!
//! A digest is posted at most once: it is marked `posted` in the database, and its
//! message carries a `uuid` derived from the digest, so a send whose mark was lost (a
//! crash, a database failure) is sent again as the same message (Feishu answers a
//! repeated uuid with the message it created first, for an hour). A failed post is
//! retried by a later pass, a few times at most, and never holds up a reset. A digest
//! with nowhere to go (no workspace owner, a profile that cannot send) is `skipped`.

use std::time::Duration;

use sha2::{Digest as _, Sha256};

use super::Digest;
use crate::{
    config::DigestPost,
    feishu_api::reply::{Content, Destination},
    store::{DigestPostMark, DigestPostStatus, DigestRow, StoreError},
    util::UnixMs,
};

/// Attempts at posting one digest before it is given up.
pub const MAX_ATTEMPTS: i64 = 5;
/// Digests older than this are not posted (turning posting on does not post the past).
const WITHIN: Duration = Duration::from_secs(2 * 24 * 3600);

/// What one pass did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PostCounts {
    pub posted: usize,
    pub failed: usize,
    pub skipped: usize,
}

impl Digest {
    /// Posts every digest waiting to be posted (nothing when `digest.post = "none"`).
    pub async fn post_pending(&self) -> Result<PostCounts, StoreError> {
        let mode = self.config.digest.post;
        let mut counts = PostCounts::default();
        if mode == DigestPost::None {
            return Ok(counts);
        }
        let window = i64::try_from(WITHIN.as_millis()).unwrap_or(i64::MAX);
        let since = UnixMs(self.clock.now().millis().saturating_sub(window));
        for row in self.store.digests_to_post(since, MAX_ATTEMPTS).await? {
            let (status, message_id, detail) = self.post_one(&row, mode).await;
            match status {
                DigestPostStatus::Posted => counts.posted += 1,
                DigestPostStatus::Failed => counts.failed += 1,
                DigestPostStatus::Skipped => counts.skipped += 1,
            }
            let mark = DigestPostMark {
                id: row.id,
                status,
                message_id: message_id.as_deref(),
                detail: detail.as_deref(),
                now: self.clock.now(),
            };
            if let Err(e) = self.store.mark_digest_post(&mark).await {
                // The next pass sends it again, with the same uuid: still one message.
                tracing::warn!(digest_id = row.id, reason = %e.reason(), "a digest's post could not be recorded");
            }
        }
        if counts != PostCounts::default() {
            tracing::info!(
                posted = counts.posted,
                failed = counts.failed,
                skipped = counts.skipped,
                "digests posted"
            );
        }
        Ok(counts)
    }

    /// Posts one digest: its status, message and why it was not posted.
    async fn post_one(
        &self,
        row: &DigestRow,
        mode: DigestPost,
    ) -> (DigestPostStatus, Option<String>, Option<String>) {
        let skipped = |why: &str| {
            tracing::warn!(digest_id = row.id, profile = %row.profile, chat_id = %row.chat_id, "a digest is not posted: {why}");
            (DigestPostStatus::Skipped, None, Some(why.to_string()))
        };
        let sendable = self
            .config
            .profile(&row.profile)
            .is_some_and(|p| !p.dry_run);
        let Some(client) = self
            .clients
            .get(&row.profile)
            .filter(|c| sendable && c.can_send())
        else {
            return skipped("the profile cannot send (dry run, no app secret, or gone)");
        };
        let owner = self
            .config
            .workspace(&row.chat_id)
            .and_then(|w| w.owner.as_deref());
        let to = match (mode, owner) {
            (DigestPost::Owner, Some(owner)) => Destination::User(owner),
            (DigestPost::Owner, None) => return skipped("the chat has no workspace owner"),
            _ => Destination::Chat(&row.chat_id),
        };
        let text = message(row, mode);
        match client.post(to, Content::Text(&text), &uuid(row)).await {
            Ok(sent) => (DigestPostStatus::Posted, Some(sent.message_id), None),
            Err(e) => {
                tracing::warn!(digest_id = row.id, error = %e, "a digest could not be posted; a later pass tries again");
                (DigestPostStatus::Failed, None, Some(e.to_string()))
            }
        }
    }
}

/// The message of a digest.
fn message(row: &DigestRow, mode: DigestPost) -> String {
    let summary = row.summary.as_deref().unwrap_or_default();
    match mode {
        DigestPost::Owner => format!(
            "Daily digest of {} in chat {} ({}):\n{summary}",
            row.date, row.chat_id, row.session_key
        ),
        _ => format!("Daily digest of {}:\n{summary}", row.date),
    }
}

/// The `uuid` of a digest's message: the same for every attempt at that digest.
pub fn uuid(row: &DigestRow) -> String {
    let mut h = Sha256::new();
    for piece in ["digest", &row.profile, &row.date, &row.session_key] {
        h.update(piece.as_bytes());
        h.update([0]);
    }
    h.update(row.id.to_le_bytes());
    hex::encode(h.finalize())[..32].to_string()
}
