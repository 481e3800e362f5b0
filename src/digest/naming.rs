//! The names a digest shows: senders in its transcripts, chats in the day's file. The
//! digest runs in the background, so what is not cached yet is looked up first.

use std::collections::HashMap;

use super::Digest;
use crate::{
    names::is_open_id,
    store::{ContextEventRow, DigestRow, NameKind},
};

impl Digest {
    /// The names of the senders of `rows` who are shown by their open_id.
    pub(super) async fn sender_names(
        &self,
        profile: &str,
        rows: &[ContextEventRow],
    ) -> HashMap<String, String> {
        let Some(names) = &self.names else {
            return HashMap::new();
        };
        let mut ids: Vec<&str> = rows
            .iter()
            .map(|r| r.author_label.as_deref().unwrap_or(&r.actor_id))
            .filter(|l| is_open_id(l))
            .collect();
        ids.sort_unstable();
        ids.dedup();
        names.names_now(profile, NameKind::User, &ids).await
    }

    /// The names of the chats of `rows`, by (profile, chat id).
    pub(super) async fn chat_names(&self, rows: &[DigestRow]) -> HashMap<(String, String), String> {
        let mut out = HashMap::new();
        let Some(names) = &self.names else {
            return out;
        };
        for r in rows {
            let key = (r.profile.clone(), r.chat_id.clone());
            if r.chat_id.is_empty() || out.contains_key(&key) {
                continue;
            }
            let found = names
                .names_now(&r.profile, NameKind::Chat, &[r.chat_id.as_str()])
                .await;
            if let Some(name) = found.get(&r.chat_id) {
                out.insert(key, name.clone());
            }
        }
        out
    }
}
