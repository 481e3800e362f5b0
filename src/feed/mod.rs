//! The batched feed: un-mentioned group messages a profile observes are gathered per
//! feed key (with their route, by the inbox worker) — their history scope's one session
//! when it has exactly one, else the chat itself (`chat:<chat_id>`) — and packed into a
//! segment once the key has `feed.batch_messages` of them or its first has waited
//! `feed.max_wait_secs` — checked on arrival and by a timer, so a quiet chat is fed too.
//! A session's own segments are attached to its history without waking its agent: at
//! most `feed.max_unread_segments` unread at a time, the rest waiting (none dropped), the
//! next attached as soon as a turn reads one. A chat's own segments wait for the chat's
//! sessions: each session invoked there is given those it has not read (the newest
//! `feed.max_unread_segments`), once. A segment is read when the turn that got it
//! succeeds. Everything is persisted; the time comes from the app's [`Clock`].

pub mod render;

use std::{
    collections::{BTreeSet, HashMap},
    sync::{Arc, Mutex},
    time::Duration,
};

use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use crate::{
    agent::{Agent, FeedInject, FeedSegment},
    config::Config,
    store::{FeedSegmentRow, PackLimits, SessionRow, SharedRead, Store, StoreError},
    telemetry::Metrics,
    util::Clock,
    vocab::{ChatType, chat::chat_feed_key},
};

/// What a flush did.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Flushed {
    /// The segment packed, if anything was gathered.
    pub packed: Option<i64>,
    /// Segments attached now (the unread limit still holds).
    pub attached: Vec<i64>,
}

/// The feed of every profile.
pub struct Feed {
    config: Arc<Config>,
    store: Arc<dyn Store>,
    agents: HashMap<String, Arc<dyn Agent>>,
    clock: Arc<dyn Clock>,
    metrics: Metrics,
    /// Sessions that gathered something since the last pass.
    nudged: Mutex<BTreeSet<(String, String)>>,
    wake: Notify,
    /// One pass at a time: packing and attaching are read-then-write.
    work: tokio::sync::Mutex<()>,
    /// Senders' names, applied when a segment is rendered.
    names: Option<Arc<crate::names::Names>>,
}

impl std::fmt::Debug for Feed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Feed")
    }
}

impl Feed {
    /// The feed over the app's parts.
    pub fn new(
        config: Arc<Config>,
        store: Arc<dyn Store>,
        agents: HashMap<String, Arc<dyn Agent>>,
        clock: Arc<dyn Clock>,
        metrics: Metrics,
    ) -> Self {
        Self {
            config,
            store,
            agents,
            clock,
            metrics,
            nudged: Mutex::default(),
            wake: Notify::new(),
            work: tokio::sync::Mutex::new(()),
            names: None,
        }
    }

    /// The feed rendering senders by their names.
    pub fn with_names(mut self, names: Arc<crate::names::Names>) -> Self {
        self.names = Some(names);
        self
    }

    /// Now, on the feed's clock (what gathered items are stamped with).
    pub fn now(&self) -> crate::util::UnixMs {
        self.clock.now()
    }

    /// The inbox gathered a message for `session_key` of `profile`.
    pub fn noted(&self, profile: &str, session_key: &str) {
        self.nudged
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert((profile.to_string(), session_key.to_string()));
        self.wake.notify_one();
    }

    /// Packs and attaches what is due, on every nudge and every tick, until `stop`.
    pub async fn run(self: Arc<Self>, stop: CancellationToken) {
        let every = (self.max_wait() / 10).clamp(Duration::from_secs(1), Duration::from_secs(30));
        loop {
            tokio::select! {
                () = stop.cancelled() => return,
                () = self.wake.notified() => {}
                () = tokio::time::sleep(every) => {}
            }
            if let Err(e) = self.tick().await {
                tracing::warn!(reason = %e.reason(), "the feed could not pack; it will try again");
            }
        }
    }

    /// One pass: sessions nudged to the batch size, and sessions whose first gathered
    /// message has waited long enough, are packed and attached. How many segments were
    /// packed.
    pub async fn tick(&self) -> Result<usize, StoreError> {
        let _one = self.work.lock().await;
        let nudged = std::mem::take(&mut *self.nudged.lock().unwrap_or_else(|p| p.into_inner()));
        let batch = self.config.feed.batch_messages as i64;
        let mut due = BTreeSet::new();
        for (profile, key) in nudged {
            if self.store.gathered_count(&profile, &key).await? >= batch {
                due.insert((profile, key));
            }
        }
        let waited_since = self.clock.now() - self.max_wait();
        for p in &self.config.profiles {
            for key in self.store.feed_due(&p.name, batch, waited_since).await? {
                due.insert((p.name.clone(), key));
            }
        }
        let mut packed = 0;
        for (profile, key) in due {
            if self.pack(&profile, &key).await?.is_some() {
                packed += 1;
            }
            self.attach(&profile, &key).await?;
        }
        Ok(packed)
    }

    /// Packs `session_key`'s gathered messages now (whatever their number or age) and
    /// attaches what the unread limit allows.
    pub async fn flush(&self, profile: &str, session_key: &str) -> Result<Flushed, StoreError> {
        let _one = self.work.lock().await;
        let packed = self.pack(profile, session_key).await?.map(|s| s.id);
        let attached = self.attach(profile, session_key).await?;
        Ok(Flushed { packed, attached })
    }

    /// [`Feed::flush`] for every session of `profile` with something gathered or
    /// waiting, one pass: each session's key and what its flush did, by key.
    pub async fn flush_profile(&self, profile: &str) -> Result<Vec<(String, Flushed)>, StoreError> {
        let _one = self.work.lock().await;
        let mut out = Vec::new();
        for key in self.store.feed_sessions(profile).await? {
            let packed = self.pack(profile, &key).await?.map(|s| s.id);
            let attached = self.attach(profile, &key).await?;
            out.push((key, Flushed { packed, attached }));
        }
        Ok(out)
    }

    /// What a turn of the session uses, oldest first: the session's own feed (what fits
    /// is attached first, then every attached, unread segment), then — for a session of
    /// a chat whose talk is gathered under the chat itself — the chat's segments this
    /// session has not read, the newest `feed.max_unread_segments`, handed to the agent
    /// here (a webhook agent gets them as `inject` calls). None is read until the turn
    /// succeeds ([`Feed::read`]).
    pub async fn for_turn(
        &self,
        profile: &str,
        session: &SessionRow,
    ) -> Result<Vec<FeedSegment>, StoreError> {
        let _one = self.work.lock().await;
        let key = session.session_key.as_str();
        let chat_key = chat_feed_key(&session.chat_id);
        // A batch that came due just before the turn is packed for it, not after it.
        let due = self.due(profile).await?;
        if due.contains(key) {
            self.pack(profile, key).await?;
        }
        self.attach(profile, key).await?;
        let mut out = Vec::new();
        for segment in self.store.attached(profile, key).await? {
            out.push(self.given(profile, &segment, false).await?);
        }
        if key == chat_key || session.chat_type == ChatType::P2p {
            return Ok(out);
        }
        if due.contains(&chat_key) {
            self.pack(profile, &chat_key).await?;
        }
        let limit = self.config.feed.max_unread_segments as i64;
        for segment in self
            .store
            .shared_unread(profile, &chat_key, key, limit)
            .await?
        {
            let given = self.given(profile, &segment, true).await?;
            if !self.inject(profile, session, &given).await {
                break;
            }
            out.push(given);
        }
        Ok(out)
    }

    /// A segment as a turn is given it.
    async fn given(
        &self,
        profile: &str,
        segment: &FeedSegmentRow,
        shared: bool,
    ) -> Result<FeedSegment, StoreError> {
        let items = self.store.segment_items(segment.id).await?;
        let items = render::named(self.names.as_deref(), profile, items).await;
        Ok(FeedSegment {
            segment_id: segment.id,
            items: items.len(),
            text: render::segment_text(&items, self.config.feed.segment_chars),
            message_ids: items.into_iter().map(|i| i.message_id).collect(),
            shared,
        })
    }

    /// Hands `segment` to the profile's agent for `session` (a webhook agent's
    /// `inject`); whether it took it.
    async fn inject(&self, profile: &str, session: &SessionRow, segment: &FeedSegment) -> bool {
        let Some(agent) = self.agents.get(profile) else {
            return true;
        };
        let inject = FeedInject {
            kind: "inject",
            turn_id: None,
            profile,
            session_key: &session.session_key,
            session_id: &session.session_id,
            segment_id: segment.segment_id,
            text: &segment.text,
        };
        match agent.inject(&inject).await {
            Ok(()) => true,
            Err(e) => {
                tracing::warn!(profile, session_key = %session.session_key, segment_id = segment.segment_id, error = %e, "feed segment not taken by the agent; it waits");
                false
            }
        }
    }

    /// A turn of `session` succeeded with `segments`: they are read (the chat's own by
    /// this session only), and the session's next waiting segments attached.
    pub async fn read(
        &self,
        profile: &str,
        session: &SessionRow,
        segments: &[FeedSegment],
        turn_id: &str,
    ) -> Result<(), StoreError> {
        if segments.is_empty() {
            return Ok(());
        }
        let _one = self.work.lock().await;
        let now = self.clock.now();
        let (shared, own): (Vec<_>, Vec<_>) = segments.iter().partition(|s| s.shared);
        let own: Vec<i64> = own.iter().map(|s| s.segment_id).collect();
        self.store.mark_read(&own, turn_id, now).await?;
        let ids: Vec<i64> = shared.iter().map(|s| s.segment_id).collect();
        let chat_key = chat_feed_key(&session.chat_id);
        let read = SharedRead {
            profile,
            feed_key: &chat_key,
            session_key: &session.session_key,
            session_id: &session.session_id,
            turn_id,
            ids: &ids,
            now,
        };
        self.store.mark_shared_read(&read).await?;
        self.metrics
            .feed
            .read
            .with_label_values(&[profile])
            .inc_by(segments.len() as u64);
        self.attach(profile, &session.session_key).await?;
        Ok(())
    }

    /// The segments turn `turn_id` read, as it was given them (messages recalled since
    /// left out), oldest first.
    pub async fn read_by(&self, turn_id: &str) -> Result<Vec<FeedSegment>, StoreError> {
        let mut out = Vec::new();
        for segment in self.store.read_by(turn_id).await? {
            out.push(self.given(&segment.profile, &segment, false).await?);
        }
        Ok(out)
    }

    /// The feed keys of `profile` whose gathered messages are due: the batch size, or
    /// the wait (one query for both).
    async fn due(&self, profile: &str) -> Result<BTreeSet<String>, StoreError> {
        let batch = self.config.feed.batch_messages as i64;
        let waited_since = self.clock.now() - self.max_wait();
        let due = self.store.feed_due(profile, batch, waited_since).await?;
        Ok(due.into_iter().collect())
    }

    fn max_wait(&self) -> Duration {
        Duration::from_secs(self.config.feed.max_wait_secs)
    }

    async fn pack(
        &self,
        profile: &str,
        session_key: &str,
    ) -> Result<Option<FeedSegmentRow>, StoreError> {
        let limits = PackLimits {
            max_items: self.config.feed.segment_items,
            max_chars: self.config.feed.segment_chars,
        };
        let segment = self
            .store
            .pack_segment(profile, session_key, limits, self.clock.now())
            .await?;
        if let Some(s) = &segment {
            tracing::info!(
                profile,
                session_key,
                segment_id = s.id,
                items = s.items,
                "feed segment packed"
            );
            self.metrics.feed.packed.with_label_values(&[profile]).inc();
        }
        Ok(segment)
    }

    /// Attaches the waiting segments the unread limit has room for, oldest first, to the
    /// session as it is now — none while the session does not exist yet (they wait for
    /// its first turn). A segment the agent did not take stays waiting, and so do the
    /// ones after it.
    async fn attach(&self, profile: &str, session_key: &str) -> Result<Vec<i64>, StoreError> {
        let Some(session) = self.store.session(profile, session_key).await? else {
            return Ok(Vec::new());
        };
        let max_unread = self.config.feed.max_unread_segments as i64;
        let mut attached = Vec::new();
        for segment in self
            .store
            .attachable(profile, session_key, max_unread)
            .await?
        {
            if self.agents.contains_key(profile) {
                let given = self.given(profile, &segment, false).await?;
                if !self.inject(profile, &session, &given).await {
                    break;
                }
            }
            if self
                .store
                .mark_attached(segment.id, &session.session_id, self.clock.now())
                .await?
            {
                self.metrics
                    .feed
                    .attached
                    .with_label_values(&[profile])
                    .inc();
                attached.push(segment.id);
            }
        }
        Ok(attached)
    }
}
