//! The durable inbox: row types, the write rules both backends share, and the
//! [`InboxStore`] trait.
//!
//! What a backend cannot store is refused before it joins a group commit
//! ([`NewInboxEvent::unstorable`]), with the same rule on SQLite and Postgres, so one bad
//! event never fails the batch it would have shared.

use async_trait::async_trait;

use super::StoreError;
use crate::util::UnixMs;

crate::util::spelled::spelled! {
    /// Inbox row status.
    pub enum InboxStatus("inbox status") {
        /// Waiting for a worker (possibly until `next_attempt_at`).
        Pending,
        /// Claimed by a worker, leased until `lease_until`.
        Processing,
        /// Processed.
        Done,
        /// A well-formed event of a type the bridge does not handle.
        Skipped,
        /// Gave up after `max_attempts`.
        Failed,
    }
}

/// A verified event on its way into the inbox.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct NewInboxEvent {
    pub profile: String,
    /// Unique per profile.
    pub event_id: String,
    pub event_type: String,
    /// For message events: also unique per profile.
    pub message_id: Option<String>,
    /// The chat whose order it takes part in ('' for none): each chat's events are
    /// processed in arrival order, different chats side by side.
    pub chat_key: String,
    /// Decrypted JSON text.
    pub payload: String,
    pub received_at: UnixMs,
    /// `Pending` or `Skipped` on its way in; then where processing stands.
    #[sqlx(try_from = "String")]
    pub status: InboxStatus,
}

/// Longest event id, event type or message id the inbox takes (Feishu's are under 100
/// bytes; Postgres cannot index a key of a few kilobytes).
pub const MAX_ID_BYTES: usize = 512;

impl NewInboxEvent {
    /// Why a backend could not store this event, if it could not: U+0000 anywhere
    /// (Postgres text cannot hold it, so SQLite refuses it too), or an id longer than
    /// [`MAX_ID_BYTES`]. The reason names the field, never its value.
    pub fn unstorable(&self) -> Option<String> {
        let ids = [
            ("event_id", Some(self.event_id.as_str())),
            ("event_type", Some(self.event_type.as_str())),
            ("message_id", self.message_id.as_deref()),
        ];
        for (field, value) in ids {
            let Some(value) = value else { continue };
            if value.contains('\0') {
                return Some(format!("{field} holds a U+0000 character"));
            }
            if value.len() > MAX_ID_BYTES {
                return Some(format!("{field} is longer than {MAX_ID_BYTES} bytes"));
            }
        }
        if json_holds_nul(&self.payload) {
            return Some("the event holds a U+0000 character".into());
        }
        None
    }
}

/// Whether JSON text holds U+0000, raw or as the `\u0000` escape (an escaped backslash
/// followed by `u0000` is not one).
fn json_holds_nul(json: &str) -> bool {
    let bytes = json.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            0 => return true,
            b'\\' => {
                if bytes.get(i + 1) == Some(&b'u') && bytes.get(i + 2..i + 6) == Some(b"0000") {
                    return true;
                }
                // Skip the escaped character, so `\\` never starts another escape.
                i += 2;
            }
            _ => i += 1,
        }
    }
    false
}

/// What happened to one event of a batch insert.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InsertOutcome {
    /// Stored.
    Inserted,
    /// Its event id (or message id) was already stored; nothing was created.
    Duplicate,
}

/// An inbox row: the event as stored, and how its processing stands.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct InboxEvent {
    /// Row id (arrival order).
    pub id: i64,
    /// What was stored (its status is where processing stands).
    #[sqlx(flatten)]
    pub event: NewInboxEvent,
    /// Processing attempts started.
    pub attempts: i64,
    /// Last processing error.
    pub last_error: Option<String>,
    /// Before this, a retry is not due.
    pub next_attempt_at: UnixMs,
}

/// Inbox depth by status.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct InboxCounts {
    /// Waiting (includes scheduled retries).
    pub pending: i64,
    /// Claimed right now.
    pub processing: i64,
    /// Given up.
    pub failed: i64,
    /// Pending rows that have failed at least once.
    pub retrying: i64,
}

/// One profile's unfinished events, for the backlog view.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProfileBacklog {
    pub profile: String,
    /// Events pending or in hand.
    pub depth: i64,
    /// When the oldest of them arrived.
    pub oldest_received_at: Option<UnixMs>,
}

/// How deep the inbox is: the counts by status, and the backlog by profile, read
/// together.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct InboxDepth {
    pub counts: InboxCounts,
    /// Profiles with unfinished events, in name order.
    pub backlog: Vec<ProfileBacklog>,
}

/// A failed or retrying event, for `/status`.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct InboxProblem {
    pub profile: String,
    pub event_id: String,
    pub event_type: String,
    /// Status (`pending` = will retry, `failed` = gave up).
    #[sqlx(try_from = "String")]
    pub status: InboxStatus,
    /// Attempts so far.
    pub attempts: i64,
    pub last_error: Option<String>,
}

/// How much one claim takes: up to `per_chat` events from each of up to `chats` chats.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClaimLimits {
    pub chats: i64,
    pub per_chat: i64,
}

/// How a processing attempt ended, for [`InboxStore::finish_inbox`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Finish {
    /// Processed.
    Done,
    /// Failed; try again at this Unix ms.
    Retry {
        /// Error text (no payload content).
        error: String,
        at: UnixMs,
    },
    /// Not the event's fault (the database failed): try again at this Unix ms, without
    /// counting the attempt towards `max_attempts`.
    Deferred {
        /// Error text (no payload content).
        error: String,
        at: UnixMs,
    },
    /// Failed for good.
    Failed {
        /// Error text (no payload content).
        error: String,
    },
}

/// The durable inbox.
#[async_trait]
pub trait InboxStore: Send + Sync + 'static {
    /// Inserts events in one transaction (group commit), begun on a connection that is
    /// not inside another transaction and committed before this returns, so `Ok` means
    /// durable. Duplicates of an existing `(profile, event_id)` or `(profile,
    /// message_id)` create nothing.
    async fn insert_inbox_batch(
        &self,
        events: &[NewInboxEvent],
    ) -> Result<Vec<InsertOutcome>, StoreError>;
    /// Claims due events for `owner` (first making claims whose lease ran out pending
    /// again): each chat's oldest due events, from the chats no worker holds (none of
    /// their events in hand), within `limits`; leases them until `now + lease_ms` and
    /// counts an attempt. Chats are taken in key order from the first key after
    /// `after_chat` (the last chat the caller took), going round to the first key, so
    /// every chat is served in turn. Answers the events in arrival order. Claims are
    /// serialized (on Postgres by an advisory lock), so one chat is never in two
    /// workers' hands and concurrent claimers never get the same row. On SQLite the claim
    /// is held in the store's memory, not written (see `held_claims`): the answer and
    /// every read of the store show it as a written claim would be.
    async fn claim_inbox(
        &self,
        owner: &str,
        now: UnixMs,
        lease_ms: i64,
        limits: ClaimLimits,
        after_chat: Option<&str>,
    ) -> Result<Vec<InboxEvent>, StoreError>;
    /// Extends the leases of `owner`'s events still in hand (`ids`) to `until`.
    async fn renew_leases(&self, owner: &str, ids: &[i64], until: UnixMs)
    -> Result<(), StoreError>;
    /// Takes back, at start, the claims an earlier run of this process left: due at once.
    /// On SQLite (one process owns the file) every claimed event; on Postgres the ones
    /// leased to `owner`. Returns how many.
    async fn reclaim_inbox(&self, owner: &str, now: UnixMs) -> Result<u64, StoreError>;
    /// Records how an attempt ended, for each of `ids`, in one transaction.
    async fn finish_inbox(
        &self,
        ids: &[i64],
        finish: &Finish,
        now: UnixMs,
    ) -> Result<(), StoreError>;
    /// Returns claimed events to pending without counting the attempt (shutdown).
    async fn release_inbox(&self, ids: &[i64]) -> Result<(), StoreError>;
    /// Inbox depth by status and, per profile with unfinished events, how many are
    /// pending or in hand and when the oldest of them arrived (the worker's lag): one
    /// read of the database.
    async fn inbox_depth(&self) -> Result<InboxDepth, StoreError>;
    /// Inbox depth by status (the counts of [`Self::inbox_depth`]).
    async fn inbox_counts(&self) -> Result<InboxCounts, StoreError> {
        Ok(self.inbox_depth().await?.counts)
    }
    /// The most recent failed or retrying events.
    async fn inbox_problems(&self, limit: i64) -> Result<Vec<InboxProblem>, StoreError>;
    /// One inbox row by its key.
    async fn inbox_event(
        &self,
        profile: &str,
        event_id: &str,
    ) -> Result<Option<InboxEvent>, StoreError>;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(event_id: &str, message_id: Option<&str>, payload: &str) -> NewInboxEvent {
        NewInboxEvent {
            profile: "p".into(),
            event_id: event_id.into(),
            event_type: "im.message.receive_v1".into(),
            message_id: message_id.map(Into::into),
            chat_key: String::new(),
            payload: payload.into(),
            received_at: UnixMs(0),
            status: InboxStatus::Pending,
        }
    }

    #[test]
    fn nul_anywhere_is_unstorable_and_the_reason_names_no_value() {
        assert_eq!(event("ev", Some("om"), r#"{"a":"b"}"#).unstorable(), None);
        let bad_id = event("ev", Some("om\0x"), "{}").unstorable();
        assert_eq!(
            bad_id.as_deref(),
            Some("message_id holds a U+0000 character")
        );
        assert!(event("e\0v", None, "{}").unstorable().is_some());
        assert!(
            event("ev", None, r#"{"t":"a\u0000b"}"#)
                .unstorable()
                .is_some()
        );
        assert!(event("ev", None, "{\"t\":\"a\0\"}").unstorable().is_some());
        // An escaped backslash followed by the letters u0000 is text, not a NUL.
        assert_eq!(event("ev", None, r#"{"t":"a\\u0000b"}"#).unstorable(), None);
        assert!(
            event("ev", None, r#"{"t":"a\\\u0000b"}"#)
                .unstorable()
                .is_some()
        );
    }

    #[test]
    fn ids_longer_than_the_index_takes_are_unstorable() {
        let long = "x".repeat(MAX_ID_BYTES + 1);
        assert!(event(&long, None, "{}").unstorable().is_some());
        assert!(event("ev", Some(&long), "{}").unstorable().is_some());
        assert_eq!(event(&long[1..], None, "{}").unstorable(), None);
    }
}
