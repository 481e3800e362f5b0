//! Display names read through the Open API, cached per profile: users by open_id and
//! chats by chat_id (see [`crate::names`]). A row says when it was looked up, so a reader
//! knows whether it is still fresh; a row without a name says the lookup answered none.

use async_trait::async_trait;

use super::StoreError;
use crate::util::UnixMs;

/// What a cached name is of.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum NameKind {
    /// A user, by open_id (app-scoped).
    User,
    /// A chat, by chat_id.
    Chat,
}

impl NameKind {
    /// `user` / `chat`, as stored.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::User => "user",
            Self::Chat => "chat",
        }
    }
}

/// One cached lookup.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CachedName {
    /// The profile whose app looked it up.
    pub profile: String,
    pub kind: NameKind,
    /// The open_id or chat_id.
    pub id: String,
    /// `None`: the lookup answered without a name.
    pub name: Option<String>,
    /// When it was looked up.
    pub fetched_at: UnixMs,
}

/// The cache of looked-up names.
#[async_trait]
pub trait NamesStore: Send + Sync + 'static {
    /// The cached entries of `ids` (of `kind`, for `profile`), fresh or not; ids never
    /// looked up are left out.
    async fn cached_names(
        &self,
        profile: &str,
        kind: NameKind,
        ids: &[String],
    ) -> Result<Vec<CachedName>, StoreError>;

    /// Stores lookups, replacing earlier ones of the same ids.
    async fn put_names(&self, names: &[CachedName]) -> Result<(), StoreError>;

    /// How many names (with a name) are cached per profile: `(profile, count)`.
    async fn names_counts(&self) -> Result<Vec<(String, i64)>, StoreError>;
}
