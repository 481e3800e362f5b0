//! The batched feed as stored: items gathered per session, segments packed from them,
//! and each segment's way from waiting to read.

use async_trait::async_trait;

use super::StoreError;
use crate::util::UnixMs;

crate::util::spelled::spelled! {
    /// Where a gathered message stands.
    pub enum FeedItemState("feed item state") {
        /// Waiting for its session's next segment.
        Gathered,
        /// In a segment.
        Packed,
        /// A newer segment filled up without it (the feed is background, not an archive).
        PassedOver,
        /// Recalled by its sender: it reaches no agent.
        Recalled,
        /// Cleared by `/new` or `/reset`.
        Cleared,
    }
}

crate::util::spelled::spelled! {
    /// Where a segment stands.
    pub enum SegmentState("feed segment state") {
        /// Packed, waiting for room among its session's unread segments.
        Waiting,
        /// In its session's history, not yet used by a turn.
        Attached,
        /// Used by a turn.
        Read,
        /// Cleared by `/new` or `/reset` before it was read.
        Cleared,
    }
}

/// An observed, un-mentioned group message to gather, written with its route.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewFeedItem {
    pub profile: String,
    /// Its feed key: the one session of its history scope, or `chat:<chat_id>`.
    pub session_key: String,
    pub chat_id: String,
    pub message_id: String,
    /// The sender as the agent is shown them.
    pub sender: String,
    pub text: String,
    /// When it was said (Feishu's time).
    pub said_at: UnixMs,
    /// When the bridge gathered it.
    pub gathered_at: UnixMs,
}

/// A stored item.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct FeedItemRow {
    pub id: i64,
    pub profile: String,
    pub session_key: String,
    pub chat_id: String,
    pub message_id: String,
    pub sender: String,
    pub text: String,
    pub said_at: UnixMs,
    pub gathered_at: UnixMs,
    #[sqlx(try_from = "String")]
    pub state: FeedItemState,
    pub segment_id: Option<i64>,
}

/// A stored segment (its text is made from its packed items, so a message recalled
/// after packing drops out of it).
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct FeedSegmentRow {
    pub id: i64,
    pub profile: String,
    pub session_key: String,
    /// Items packed.
    pub items: i64,
    /// Characters of their text (senders included) when packed.
    pub chars: i64,
    #[sqlx(try_from = "String")]
    pub state: SegmentState,
    pub packed_at: UnixMs,
    /// The session id it was attached under.
    pub session_id: Option<String>,
    pub attached_at: Option<UnixMs>,
    pub read_at: Option<UnixMs>,
    /// The turn that used it.
    pub read_by_turn: Option<String>,
}

/// Chat-feed segments a session's turn read.
#[derive(Debug, Clone, Copy)]
pub struct SharedRead<'a> {
    pub profile: &'a str,
    /// The chat's feed key, `chat:<chat_id>`.
    pub feed_key: &'a str,
    pub session_key: &'a str,
    pub session_id: &'a str,
    pub turn_id: &'a str,
    pub ids: &'a [i64],
    pub now: UnixMs,
}

/// A session's gathered items as a segment packer sees them: newest first.
#[derive(Debug, Clone, Copy)]
pub struct PackLimits {
    /// At most this many items.
    pub max_items: usize,
    /// At most this many characters (each item's sender and text).
    pub max_chars: usize,
}

/// One session's feed, for `GET /feed`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SessionFeed {
    /// Gathered items, oldest first.
    pub gathered: Vec<FeedItemRow>,
    /// Segments, oldest first.
    pub segments: Vec<FeedSegmentRow>,
}

/// The batched feed.
#[async_trait]
pub trait FeedStore: Send + Sync + 'static {
    /// Sessions of `profile` whose feed is due: `batch` or more gathered items, or an
    /// item gathered at or before `waited_since`.
    async fn feed_due(
        &self,
        profile: &str,
        batch: i64,
        waited_since: UnixMs,
    ) -> Result<Vec<String>, StoreError>;
    /// How many items a session has gathered.
    async fn gathered_count(&self, profile: &str, session_key: &str) -> Result<i64, StoreError>;
    /// Packs a session's gathered items into a waiting segment, newest first within
    /// `limits`, in one transaction: the items taken are packed, the older ones left out
    /// passed over. `None` when nothing was gathered.
    async fn pack_segment(
        &self,
        profile: &str,
        session_key: &str,
        limits: PackLimits,
        now: UnixMs,
    ) -> Result<Option<FeedSegmentRow>, StoreError>;
    /// The waiting segments that fit under `max_unread` attached ones, oldest first.
    async fn attachable(
        &self,
        profile: &str,
        session_key: &str,
        max_unread: i64,
    ) -> Result<Vec<FeedSegmentRow>, StoreError>;
    /// Attaches a waiting segment under `session_id`; `false` when it was not waiting.
    async fn mark_attached(
        &self,
        segment_id: i64,
        session_id: &str,
        now: UnixMs,
    ) -> Result<bool, StoreError>;
    /// A session's attached, unread segments, oldest first.
    async fn attached(
        &self,
        profile: &str,
        session_key: &str,
    ) -> Result<Vec<FeedSegmentRow>, StoreError>;
    /// A segment's packed items (not recalled since), oldest first.
    async fn segment_items(&self, segment_id: i64) -> Result<Vec<FeedItemRow>, StoreError>;
    /// Marks attached segments read by `turn_id`.
    async fn mark_read(&self, ids: &[i64], turn_id: &str, now: UnixMs) -> Result<(), StoreError>;
    /// The chat feed `feed_key`'s segments `session_key` has not read: the newest
    /// `limit` packed after the newest it read (or was cleared past), oldest first.
    async fn shared_unread(
        &self,
        profile: &str,
        feed_key: &str,
        session_key: &str,
        limit: i64,
    ) -> Result<Vec<FeedSegmentRow>, StoreError>;
    /// A session read chat-feed segments, in one transaction (each session once).
    async fn mark_shared_read(&self, read: &SharedRead<'_>) -> Result<(), StoreError>;
    /// The segments a turn used.
    async fn read_by(&self, turn_id: &str) -> Result<Vec<FeedSegmentRow>, StoreError>;
    /// One session's feed.
    async fn session_feed(
        &self,
        profile: &str,
        session_key: &str,
    ) -> Result<SessionFeed, StoreError>;
    /// The sessions of `profile` with gathered items or waiting segments: what a flush
    /// of the whole profile packs and attaches. Sorted by session key.
    async fn feed_sessions(&self, profile: &str) -> Result<Vec<String>, StoreError>;
    /// Every profile's sessions with unread segments or gathered items: (profile,
    /// session_key, gathered, waiting, attached), for `/status` and metrics.
    async fn feed_counts(&self) -> Result<Vec<FeedCounts>, StoreError>;
}

/// How full one profile's feed is.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct FeedCounts {
    pub profile: String,
    /// Items gathered, not yet packed.
    pub gathered: i64,
    /// Segments waiting for room.
    pub waiting: i64,
    /// Segments attached, unread.
    pub attached: i64,
    /// Segments read.
    pub read: i64,
}
