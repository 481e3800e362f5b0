//! Handoffs: one bot's answer handing work to another profile of the hub — what each
//! handoff came to (started, refused, cut, cancelled), the turns of a chain, and what a
//! completion writes when its answer hands over.

use async_trait::async_trait;

use super::StoreError;
use crate::util::UnixMs;

/// One handoff asked for, as stored (and read back).
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct HandoffRow {
    /// The target's turn id (derived from the handing turn and the target), also when
    /// no turn was queued.
    pub turn_id: String,
    /// `chain_<hex>`.
    pub chain_id: String,
    /// 1 for the first handoff of the chain.
    pub hop: i64,
    /// The turn whose answer handed over.
    pub parent_turn_id: String,
    pub from_profile: String,
    pub to_profile: String,
    pub chat_id: String,
    pub root_msg_id: String,
    /// The answer that handed over (the target's request message).
    pub message_id: String,
    /// The person whose request started the chain.
    pub root_open_id: String,
    /// Their display name, when known.
    pub root_name: Option<String>,
    /// The profiles of the chain, in order, joined by `>`.
    pub path: String,
    /// `mention` or `field`.
    pub via: String,
    /// `started`, `refused`, `cut_hops`, `cut_pingpong`, `cut_budget`, `cancelled`.
    pub outcome: String,
    pub created_at: UnixMs,
}

/// A turn of a chain, for `/stop`.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct ChainTurn {
    pub turn_id: String,
    pub profile: String,
    pub session_key: String,
}

/// Where to look for a chain's turns: a thread, or a whole chat.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChainPlace<'a> {
    pub chat_id: &'a str,
    /// The thread's root; `None`: every thread of the chat.
    pub root_msg_id: Option<&'a str>,
}

/// Handoff records and chains.
#[async_trait]
pub trait HandoffStore: Send + Sync + 'static {
    /// Handoff turns started in a thread since `since`.
    async fn handoffs_started_since(
        &self,
        chat_id: &str,
        root_msg_id: &str,
        since: UnixMs,
    ) -> Result<i64, StoreError>;
    /// The handoff that queued (or would have queued) turn `turn_id`.
    async fn handoff(&self, turn_id: &str) -> Result<Option<HandoffRow>, StoreError>;
    /// Cancels the queued handoff turns of every chain at `place` (their handoffs become
    /// `cancelled`); the turns cancelled.
    async fn cancel_chain_hops(
        &self,
        place: ChainPlace<'_>,
        now: UnixMs,
    ) -> Result<Vec<ChainTurn>, StoreError>;
    /// The running handoff turns at `place`.
    async fn running_chain_turns(
        &self,
        place: ChainPlace<'_>,
    ) -> Result<Vec<ChainTurn>, StoreError>;
}
