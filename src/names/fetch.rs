//! The background lookup: queued ids grouped by profile and kind, users
//! [`USERS_PER_CALL`] at a time, chats one by one; what Feishu answers is stored (a name,
//! or none for an id it answered nothing for), what it refuses for a missing scope is
//! left as ids until the scope's refusal has aged out.

use std::collections::{BTreeMap, BTreeSet};

use super::{Key, Names};
use crate::{
    feishu_api::{FeishuClient, OpenApiError, codes::MISSING_SCOPE, directory::USERS_PER_CALL},
    store::{CachedName, NameKind},
    util::UnixMs,
};

/// How one lookup went.
enum Looked {
    /// Stored: a name (or none) for each id.
    Found(Vec<(String, Option<String>)>),
    /// The scope is missing: nothing more of this kind for the profile.
    Refused,
    /// Failed otherwise: left for a later lookup.
    Failed,
}

impl Names {
    /// Looks up `queued` and stores what comes back.
    pub(super) async fn look_up(&self, queued: BTreeSet<Key>) {
        let mut groups: BTreeMap<(String, NameKind), Vec<String>> = BTreeMap::new();
        for (profile, kind, id) in queued {
            groups.entry((profile, kind)).or_default().push(id);
        }
        for ((profile, kind), ids) in groups {
            let Some(client) = self.clients.get(&profile).cloned() else {
                continue;
            };
            let now = self.clock.now();
            if self.refused.blocks(&profile, kind, now, self.ttl_ms()) {
                continue;
            }
            let batches: Vec<Vec<String>> = match kind {
                NameKind::User => ids.chunks(USERS_PER_CALL).map(<[String]>::to_vec).collect(),
                NameKind::Chat => ids.into_iter().map(|id| vec![id]).collect(),
            };
            for batch in batches {
                match self.look_up_batch(&client, &profile, kind, &batch).await {
                    Looked::Found(found) => {
                        // Answered: a scope refused before has been granted since.
                        self.refused.clear(&profile, kind);
                        self.store_found(&profile, kind, found).await;
                    }
                    Looked::Refused => {
                        self.refused.refuse(&profile, kind, self.clock.now());
                        break;
                    }
                    Looked::Failed => {}
                }
            }
        }
    }

    async fn look_up_batch(
        &self,
        client: &FeishuClient,
        profile: &str,
        kind: NameKind,
        ids: &[String],
    ) -> Looked {
        let answer = match kind {
            NameKind::User => client.user_names(ids).await.map(|found| {
                ids.iter()
                    .map(|id| {
                        let name = found.iter().find(|(o, _)| o == id).map(|(_, n)| n.clone());
                        (id.clone(), name)
                    })
                    .collect()
            }),
            NameKind::Chat => match ids.first() {
                Some(id) => client
                    .chat_name(id)
                    .await
                    .map(|name| vec![(id.clone(), name)]),
                None => Ok(Vec::new()),
            },
        };
        match answer {
            Ok(found) => Looked::Found(found),
            Err(e) if e.is(&MISSING_SCOPE) => Looked::Refused,
            Err(e @ OpenApiError::Api { .. }) => {
                // Feishu answered, and not with a name (a user or chat the app cannot
                // see, say): remembered as nameless, so it is not asked for again
                // before the time to live is over.
                tracing::info!(profile, kind = kind.as_str(), ids = ids.len(), error = %e, "names not available; ids are shown");
                Looked::Found(ids.iter().map(|id| (id.clone(), None)).collect())
            }
            Err(e) => {
                tracing::warn!(profile, kind = kind.as_str(), error = %e, "names not looked up; tried again when next shown");
                Looked::Failed
            }
        }
    }

    async fn store_found(
        &self,
        profile: &str,
        kind: NameKind,
        found: Vec<(String, Option<String>)>,
    ) {
        let now: UnixMs = self.clock.now();
        let rows: Vec<CachedName> = found
            .into_iter()
            .map(|(id, name)| CachedName {
                profile: profile.to_string(),
                kind,
                id,
                name,
                fetched_at: now,
            })
            .collect();
        if let Err(e) = self.store.put_names(&rows).await {
            tracing::warn!(profile, reason = %e.reason(), "looked-up names not stored; kept in memory");
        }
        for row in rows {
            self.remember(row);
        }
    }
}
