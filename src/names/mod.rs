//! Display names of senders and chats: read from the database's cache (with a map in
//! memory in front), looked up through each profile's Open API client in the background
//! (`fetch`), never while a message is ingested or a turn waits. A name not cached yet
//! is shown as its id this time, and the id is queued for the next lookup; a name older
//! than `names.ttl_secs` is still shown while it is looked up again. Open_ids are
//! app-scoped, so everything is kept per profile. A scope Feishu refuses is remembered
//! (`scopes`), logged once, shown in `/status`, and not asked for again before the time
//! to live is over.

mod fetch;
mod scopes;

use std::{
    collections::{BTreeSet, HashMap},
    sync::{Arc, Mutex},
};

use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use crate::{
    config::NamesConfig,
    feishu_api::FeishuClient,
    store::{CachedName, NameKind, Store},
    util::{Clock, UnixMs},
};
pub use scopes::{NamesStatus, NamesStatusBody};

/// What one cached name is of: profile, kind, id.
type Key = (String, NameKind, String);

/// One name in memory.
#[derive(Debug, Clone)]
struct Entry {
    name: Option<String>,
    fetched_at: UnixMs,
}

/// The names of every profile.
pub struct Names {
    config: NamesConfig,
    store: Arc<dyn Store>,
    clients: HashMap<String, Arc<FeishuClient>>,
    clock: Arc<dyn Clock>,
    memory: Mutex<HashMap<Key, Entry>>,
    /// Ids to look up.
    queue: Mutex<BTreeSet<Key>>,
    wake: Notify,
    /// One lookup pass at a time.
    work: tokio::sync::Mutex<()>,
    refused: scopes::Refused,
}

impl std::fmt::Debug for Names {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Names")
    }
}

/// Whether `label` is a bare open_id (a sender whose name was never learned).
pub fn is_open_id(label: &str) -> bool {
    label.starts_with("ou_")
}

impl Names {
    /// The names over the app's parts.
    pub fn new(
        config: NamesConfig,
        store: Arc<dyn Store>,
        clients: HashMap<String, Arc<FeishuClient>>,
        clock: Arc<dyn Clock>,
    ) -> Self {
        Self {
            config,
            store,
            clients,
            clock,
            memory: Mutex::default(),
            queue: Mutex::default(),
            wake: Notify::new(),
            work: tokio::sync::Mutex::new(()),
            refused: scopes::Refused::default(),
        }
    }

    fn ttl_ms(&self) -> i64 {
        i64::try_from(self.config.ttl_secs.saturating_mul(1000)).unwrap_or(i64::MAX)
    }

    fn fresh(&self, e: &Entry) -> bool {
        self.clock.now().0.saturating_sub(e.fetched_at.0) < self.ttl_ms()
    }

    /// The known names of `ids` (users' open_ids or chat ids) of `profile`: what is
    /// cached, fresh or not. Ids not cached, or cached longer than the time to live,
    /// are queued for the background lookup. Never calls the Open API.
    pub async fn names(
        &self,
        profile: &str,
        kind: NameKind,
        ids: &[&str],
    ) -> HashMap<String, String> {
        let mut out = HashMap::new();
        // A profile without an app secret cannot call the Open API: its ids stay.
        let can_call = self.clients.get(profile).is_some_and(|c| c.can_send());
        if !self.config.enabled || !can_call {
            return out;
        }
        let ids: BTreeSet<String> = ids
            .iter()
            .filter(|id| !id.is_empty())
            .map(|id| id.to_string())
            .collect();
        let mut unknown = Vec::new();
        let mut stale = Vec::new();
        {
            let memory = self.memory.lock().unwrap_or_else(|p| p.into_inner());
            for id in ids {
                match memory.get(&(profile.to_string(), kind, id.clone())) {
                    Some(e) => {
                        if let Some(n) = &e.name {
                            out.insert(id.clone(), n.clone());
                        }
                        if !self.fresh(e) {
                            stale.push(id);
                        }
                    }
                    None => unknown.push(id),
                }
            }
        }
        if !unknown.is_empty() {
            match self.store.cached_names(profile, kind, &unknown).await {
                Ok(rows) => {
                    let found: BTreeSet<String> = rows.iter().map(|r| r.id.clone()).collect();
                    for row in rows {
                        let entry = self.remember(row);
                        if let Some(n) = &entry.1.name {
                            out.insert(entry.0.clone(), n.clone());
                        }
                        if !self.fresh(&entry.1) {
                            stale.push(entry.0);
                        }
                    }
                    stale.extend(unknown.into_iter().filter(|id| !found.contains(id)));
                }
                Err(e) => {
                    tracing::debug!(profile, reason = %e.reason(), "cached names not read");
                    stale.extend(unknown);
                }
            }
        }
        self.want(profile, kind, stale);
        out
    }

    /// The users' names among `labels`: each bare open_id that has a name is mapped to
    /// it (see [`relabel`]).
    pub async fn users(&self, profile: &str, labels: &[&str]) -> HashMap<String, String> {
        let ids: Vec<&str> = labels.iter().copied().filter(|l| is_open_id(l)).collect();
        self.names(profile, NameKind::User, &ids).await
    }

    /// Each of `labels` that is a bare open_id with a known name is replaced by it (the
    /// others are queued for the lookup, and stay as they are this time).
    pub async fn relabel_users(&self, profile: &str, labels: Vec<&mut String>) {
        let shown: Vec<&str> = labels.iter().map(|l| l.as_str()).collect();
        let known = self.users(profile, &shown).await;
        for label in labels {
            if let Some(name) = known.get(label.as_str()) {
                *label = name.clone();
            }
        }
    }

    /// [`Self::names`], for background work that can wait: what is not cached is looked
    /// up first.
    pub async fn names_now(
        &self,
        profile: &str,
        kind: NameKind,
        ids: &[&str],
    ) -> HashMap<String, String> {
        let known = self.names(profile, kind, ids).await;
        if known.len() == ids.len() {
            return known;
        }
        // After any pass under way, which may hold some of them.
        self.flush().await;
        self.names(profile, kind, ids).await
    }

    /// A chat's name, when known (else it is queued).
    pub async fn chat(&self, profile: &str, chat_id: &str) -> Option<String> {
        let mut names = self.names(profile, NameKind::Chat, &[chat_id]).await;
        names.remove(chat_id)
    }

    /// Keeps a cached row in memory; its id and entry.
    fn remember(&self, row: CachedName) -> (String, Entry) {
        let entry = Entry {
            name: row.name,
            fetched_at: row.fetched_at,
        };
        let mut memory = self.memory.lock().unwrap_or_else(|p| p.into_inner());
        memory.insert((row.profile, row.kind, row.id.clone()), entry.clone());
        (row.id, entry)
    }

    /// Queues `ids` for the background lookup.
    fn want(&self, profile: &str, kind: NameKind, ids: Vec<String>) {
        if ids.is_empty() {
            return;
        }
        let mut queue = self.queue.lock().unwrap_or_else(|p| p.into_inner());
        for id in ids {
            queue.insert((profile.to_string(), kind, id));
        }
        drop(queue);
        self.wake.notify_one();
    }

    /// Ids waiting for a lookup.
    pub fn pending(&self) -> usize {
        self.queue.lock().unwrap_or_else(|p| p.into_inner()).len()
    }

    /// Looks up what is queued whenever something is, until `stop`.
    pub async fn run(self: Arc<Self>, stop: CancellationToken) {
        loop {
            tokio::select! {
                () = stop.cancelled() => return,
                () = self.wake.notified() => {}
            }
            tokio::select! {
                () = stop.cancelled() => return,
                () = self.flush() => {}
            }
        }
    }

    /// Looks up everything queued now (after any pass under way), and returns when it
    /// is stored: what the background does, and what tests wait for.
    pub async fn flush(&self) {
        let _one = self.work.lock().await;
        let queued = std::mem::take(&mut *self.queue.lock().unwrap_or_else(|p| p.into_inner()));
        self.look_up(queued).await;
    }
}

/// `label` with its name when it is a bare open_id `names` has one for.
pub fn relabel(names: &HashMap<String, String>, label: &str) -> String {
    names
        .get(label)
        .cloned()
        .unwrap_or_else(|| label.to_string())
}
