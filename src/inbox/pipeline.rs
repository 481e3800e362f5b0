//! What processing inbox events means: parse them, and for a message normalize, route
//! and record it (event log, verdict, session, turn), then run its command or hand its
//! turn to the session's queue. A recall removes the message from every context.
//!
//! Events are processed a batch at a time, in arrival order: everything the batch writes
//! goes into one transaction with the `done` marks of the events it finishes. A command
//! ends a batch's transaction (it acts on what came before it, and what comes after sees
//! its effect). When the database refuses a batch's transaction for something one event
//! carries, each event is processed again on its own, so only that one fails.

use std::{
    collections::{HashMap, HashSet},
    sync::{Arc, Mutex},
    time::Duration,
};

use tokio::time::Instant;

use crate::{
    config::{Config, WorkspaceMode},
    context::collector::{self, Message},
    feed::Feed,
    feishu_api::identity::Identities,
    feishu_api::outbound::{Outbound, OutboundError},
    inbox::commands::{self, CommandError},
    inbox::routed::RoutedMessage,
    protocol::{
        content,
        events::{self, MessageReceive, TypedEvent},
    },
    routing::{self, Inbound, Place, Reason, Record, Sender, Verdict},
    store::{
        BatchStep, EventLog, HandoffStore, InboxEvent, NewFeedItem, NewVerdict, ProcessedBatch,
        Routed, SessionStore, Store, StoreError, TurnLeases,
    },
    turns::TurnRunner,
    turns::queue::SessionQueues,
    util::UnixMs,
    vocab::ChatType,
};

/// Why an event could not be processed. Messages never contain payload content.
#[derive(Debug, thiserror::Error)]
pub enum ProcessError {
    /// The payload does not have the shape of its event type.
    #[error(transparent)]
    Parse(#[from] events::ParseError),
    /// The database failed (the event is retried), or refused what the event carried
    /// (retried up to `worker.max_attempts`); shown with the database's own reason.
    #[error("store: {}", .0.reason())]
    Store(#[from] StoreError),
    /// A reply could not be sent.
    #[error("reply not sent: {0}")]
    Reply(#[source] crate::feishu_api::OpenApiError),
}

impl From<CommandError> for ProcessError {
    fn from(e: CommandError) -> Self {
        match e {
            CommandError::Store(s) | CommandError::Reply(OutboundError::Store(s)) => Self::Store(s),
            CommandError::Reply(OutboundError::Api(e)) => Self::Reply(e),
        }
    }
}

/// How often retention runs (it rides on an event-log write).
const PURGE_EVERY: Duration = Duration::from_secs(60);

/// The processing stages and what they share.
pub struct Pipeline {
    config: Arc<Config>,
    log: Arc<dyn EventLog>,
    sessions: Arc<dyn SessionStore>,
    leases: Arc<dyn TurnLeases>,
    handoffs: Arc<dyn HandoffStore>,
    identities: Arc<Identities>,
    queues: SessionQueues,
    outbound: Arc<dyn Outbound>,
    turns: Arc<TurnRunner>,
    /// Told of what each batch gathered (its packing is checked on arrival).
    feed: Arc<Feed>,
    last_purge: Mutex<Option<Instant>>,
}

impl std::fmt::Debug for Pipeline {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Pipeline")
    }
}

impl Pipeline {
    /// A pipeline over the app's parts.
    pub fn new(
        config: Arc<Config>,
        store: Arc<dyn Store>,
        identities: Arc<Identities>,
        queues: SessionQueues,
        outbound: Arc<dyn Outbound>,
        turns: Arc<TurnRunner>,
        feed: Arc<Feed>,
    ) -> Self {
        Self {
            feed,
            config,
            log: store.clone(),
            leases: store.clone(),
            handoffs: store.clone(),
            sessions: store,
            identities,
            queues,
            outbound,
            turns,
            last_purge: Mutex::new(None),
        }
    }

    /// Processes claimed events (in arrival order) and records them: what each event
    /// came to, in the batch's order. When the database fails part-way, what the events
    /// before the failure came to is recorded (and stays so: a command among them has
    /// run), and the events from the failure on are not.
    pub async fn process_batch(&self, events: &[InboxEvent]) -> Result<Vec<Settled>, Unfinished> {
        let mut settled = Vec::with_capacity(events.len());
        match self.process_into(events, &mut settled).await {
            Ok(()) => Ok(settled),
            Err(error) => Err(Unfinished { settled, error }),
        }
    }

    /// [`Self::process_batch`], pushing what each event came to onto `settled` as its
    /// part is recorded: on `Err`, `settled` covers the events before the failure.
    async fn process_into(
        &self,
        events: &[InboxEvent],
        settled: &mut Vec<Settled>,
    ) -> Result<(), StoreError> {
        let mut batch = Batch::read(self.log.as_ref(), events).await?;
        self.purge_if_due().await;
        let mut start = 0;
        while start < events.len() {
            // Up to and including the next command.
            let mut steps = Vec::new();
            let mut end = start;
            let mut command = false;
            while end < events.len() && !command {
                let step = self.step(&mut batch, &events[end]);
                command = step
                    .routed
                    .as_ref()
                    .is_some_and(|r| r.route.command.is_some());
                steps.push(step);
                end += 1;
            }
            match self.record(&events[start..end], steps).await {
                Ok(part) => settled.extend(part),
                Err(e) if e.database_failed() => return Err(e),
                Err(e) if end - start == 1 => {
                    settled.push(Settled::Open(Err(ProcessError::Store(e))));
                }
                // Something one of them carries: each on its own, so only that one fails.
                Err(e) => {
                    tracing::warn!(error = %e.reason(), events = end - start, "batch refused; processing its events one by one");
                    for event in &events[start..end] {
                        // Read afresh: what the others wrote meanwhile counts.
                        let mut one =
                            Batch::read(self.log.as_ref(), std::slice::from_ref(event)).await?;
                        let step = self.step(&mut one, event);
                        match self.record(std::slice::from_ref(event), vec![step]).await {
                            Ok(part) => settled.extend(part),
                            Err(e) if e.database_failed() => return Err(e),
                            Err(e) => settled.push(Settled::Open(Err(ProcessError::Store(e)))),
                        }
                    }
                }
            }
            start = end;
        }
        Ok(())
    }

    /// What one event comes to, before anything is written.
    fn step(&self, batch: &mut Batch, event: &InboxEvent) -> Step {
        let e = &event.event;
        let mut step = Step {
            write: None,
            routed: None,
            error: None,
        };
        // A recalled message is never parsed again (its payload is gone by design).
        if let Some(message_id) = &e.message_id
            && batch.recalled.contains(message_id)
        {
            step.write = Some(BatchStep::Verdict(NewVerdict {
                profile: e.profile.clone(),
                message_id: message_id.clone(),
                chat_id: String::new(),
                verdict: Verdict::Ignored,
                reason: Reason::Recalled,
                session_key: None,
                created_at: UnixMs::now(),
            }));
            return step;
        }
        match batch.parsed.remove(&event.id) {
            Some(Err(error)) => step.error = Some(ProcessError::Parse(error)),
            Some(Ok(TypedEvent::MessageReceive(m))) => {
                let names = batch.names.entry(e.profile.clone()).or_default();
                if let Some(routed) = self.route(&e.profile, &m, names) {
                    let now = UnixMs::now();
                    let mut write = routed.write(now, self.turns.owner());
                    write.feed = self.feed_item(&routed, self.feed.now());
                    step.write = Some(BatchStep::Route(Box::new(write)));
                    // Names learned here label the messages after this one.
                    names.extend(routed.names.iter().cloned());
                    step.routed = Some(routed);
                }
            }
            Some(Ok(TypedEvent::MessageRecalled(r))) => {
                batch.recalled.insert(r.message_id.clone());
                tracing::info!(message_id = %r.message_id, "message recalled: text removed, excluded from context");
                step.write = Some(BatchStep::Recall {
                    message_id: r.message_id,
                    chat_id: r.chat_id,
                });
            }
            Some(Ok(TypedEvent::CardAction(_) | TypedEvent::LegacyCardAction(_))) | None => {}
        }
        step
    }

    /// Writes `steps` in one transaction, with the `done` marks of the events they
    /// finish; then runs the command (the last step, if any) and queues the new turns.
    async fn record(
        &self,
        events: &[InboxEvent],
        steps: Vec<Step>,
    ) -> Result<Vec<Settled>, StoreError> {
        let mut batch = ProcessedBatch {
            now: UnixMs::now(),
            ..ProcessedBatch::default()
        };
        for (step, event) in steps.iter().zip(events) {
            let command = step
                .routed
                .as_ref()
                .is_some_and(|r| r.route.command.is_some());
            if step.error.is_none() && !command {
                batch.done.push(event.id);
            }
            if let Some(write) = &step.write {
                batch.steps.push(write.clone());
            }
        }
        let mut stored = self.log.record_batch(&batch).await?.into_iter();
        for step in &batch.steps {
            if let BatchStep::Route(w) = step
                && let Some(item) = &w.feed
            {
                self.feed.noted(&item.profile, &item.session_key);
            }
        }
        let mut settled = Vec::with_capacity(steps.len());
        for step in steps {
            let routed: Option<Routed> = step.write.as_ref().and_then(|_| stored.next()).flatten();
            settled.push(match (step.error, step.routed, routed) {
                (Some(e), _, _) => Settled::Open(Err(e)),
                (None, Some(message), Some(stored)) => self.after_route(message, stored).await,
                (None, _, _) => Settled::Done,
            });
        }
        Ok(settled)
    }

    /// After a routed message is recorded: runs its command or queues its turn.
    async fn after_route(&self, routed: RoutedMessage, stored: Routed) -> Settled {
        let (m, r) = (&routed.message, &routed.route);
        tracing::debug!(profile = %m.profile, message_id = %m.message_id, verdict = %r.verdict, reason = %r.reason, session_key = ?r.session_key, fresh = stored.fresh, "message routed");
        let Some(session) = stored.session else {
            return Settled::Done;
        };
        if let Some(call) = routed.command(&session) {
            tracing::info!(profile = %m.profile, message_id = %m.message_id, session_key = %session.session_key, "command");
            let sessions = self.sessions.as_ref();
            return Settled::Open(
                commands::execute(
                    commands::CommandStores {
                        sessions,
                        leases: self.leases.as_ref(),
                        handoffs: self.handoffs.as_ref(),
                    },
                    &self.queues,
                    self.outbound.as_ref(),
                    &call,
                )
                .await
                .map_err(ProcessError::from),
            );
        }
        // Routed before: its turn was queued then (and runs, or is recovered).
        if let Some(job) = routed.job.filter(|_| stored.fresh) {
            tracing::info!(profile = %m.profile, message_id = %m.message_id, turn_id = %job.turn_id, session_key = %job.session_key, "turn queued");
            self.turns.submit(&self.queues, job);
        }
        Settled::Done
    }

    /// The batched-feed item of a routed message: an observed (not invoking) group
    /// message with text, recorded as discussion or a topic root, of a profile whose feed
    /// is on in that chat — under its scope's feed key (see [`Place::feed_key`]). Private
    /// chats, this bot's own messages and other apps' (never recorded) never are, nor is
    /// anything in an `owner_only` workspace, where un-mentioned talk is not recorded
    /// (its main-chat messages are kept only as roots of the threads under them).
    fn feed_item(&self, routed: &RoutedMessage, now: UnixMs) -> Option<NewFeedItem> {
        let (m, r) = (&routed.message, &routed.route);
        let profile = self.config.profile(&m.profile)?;
        let recorded = r
            .records
            .iter()
            .any(|rec| matches!(rec, Record::HumanMessage | Record::TopicRoot));
        let gather = r.verdict == Verdict::Observed
            && r.mode != Some(WorkspaceMode::OwnerOnly)
            && !m.place.is_dm
            && recorded
            && !m.text.trim().is_empty()
            && self.config.feed_enabled(profile, &m.place.chat_id);
        gather.then(|| NewFeedItem {
            profile: m.profile.clone(),
            session_key: m.place.feed_key(profile),
            chat_id: m.place.chat_id.clone(),
            message_id: m.message_id.clone(),
            sender: m.author_label.clone(),
            text: m.text.clone(),
            said_at: m.created_at,
            gathered_at: now,
        })
    }

    fn purge_due(&self) -> Option<UnixMs> {
        let mut last = self.last_purge.lock().unwrap_or_else(|p| p.into_inner());
        if last.is_some_and(|t| t.elapsed() < PURGE_EVERY) {
            return None;
        }
        *last = Some(Instant::now());
        let days = u64::from(self.config.context.retention_days);
        Some(UnixMs::now() - Duration::from_secs(days * 24 * 3600))
    }

    /// The message as recorded and the route it takes; `None` for a profile no longer
    /// configured.
    fn route(
        &self,
        profile_name: &str,
        ev: &MessageReceive,
        names: &HashMap<String, String>,
    ) -> Option<RoutedMessage> {
        let Some(profile) = self.config.profile(profile_name) else {
            tracing::warn!(
                profile = profile_name,
                "event for a profile no longer configured; dropped"
            );
            return None;
        };
        let msg = &ev.message;
        let bot = self.identities.get(profile_name);
        let content = content::normalize(
            &msg.message_type,
            &msg.content,
            &msg.mentions,
            bot.as_deref(),
        );
        let chat_type = ChatType::of(&msg.chat_type);
        let place = Place::of(
            &msg.chat_id,
            chat_type,
            &msg.message_id,
            msg.root_id.as_deref(),
            msg.thread_id.as_deref(),
        );
        let ids = &ev.sender.sender_id;
        let sender = Sender {
            open_id: ids.open_id.as_deref(),
            union_id: ids.union_id.as_deref(),
            user_id: ids.user_id.as_deref(),
            sender_type: &ev.sender.sender_type,
        };
        let route = routing::route(&Inbound {
            profile,
            bot_open_id: bot.as_deref(),
            workspace: self.config.workspace(&msg.chat_id),
            place: &place,
            sender: sender.clone(),
            content: &content,
            topic_root_enabled: self.config.topic_root_enabled(profile),
        });
        let actor_id = ids.open_id.clone().unwrap_or_default();
        let author_label = author_label(profile_name, &sender, &actor_id, bot.as_deref(), names);
        let message = Message {
            profile: profile_name.to_string(),
            app_id: profile.app_id.clone(),
            history_scope: place.history_scope(profile),
            place,
            chat_type,
            thread_id: msg.thread_id.clone(),
            message_id: msg.message_id.clone(),
            parent_id: msg.parent_id.clone(),
            actor_type: ev.sender.sender_type.clone(),
            actor_id,
            author_label,
            metadata: collector::with_media(
                collector::metadata(
                    &msg.message_type,
                    content.placeholder,
                    content.mentions_all,
                    msg.parent_id.as_deref(),
                ),
                &content.media,
            ),
            text: content.text,
            bot_open_id: bot,
            created_at: msg
                .create_time
                .as_deref()
                .and_then(|t| t.parse::<i64>().ok())
                .map_or_else(UnixMs::now, UnixMs),
        };
        let mut routed = RoutedMessage::new(message, route, content.names);
        if let Some(job) = &mut routed.job {
            let known = |id: &Option<String>| id.clone().filter(|i| !i.is_empty());
            job.sender_union_id = known(&ids.union_id);
            job.sender_user_id = known(&ids.user_id);
        }
        Some(routed)
    }

    /// Retention rides on message traffic, in its own short transaction; a failure only
    /// waits for the next round.
    async fn purge_if_due(&self) {
        if let Some(cutoff) = self.purge_due()
            && let Err(e) = self.log.purge(cutoff).await
        {
            tracing::warn!(error = %e, "retention purge failed");
        }
    }
}

/// How a sender is shown to agents: a remembered display name, else the open_id; this
/// bot by its profile name; other apps as `app:<id>`.
fn author_label(
    profile: &str,
    sender: &Sender<'_>,
    actor_id: &str,
    bot: Option<&str>,
    names: &HashMap<String, String>,
) -> String {
    if bot.is_some() && Some(actor_id) == bot {
        return format!("{profile} (this bot)");
    }
    if sender.sender_type != "user" {
        return format!("app:{actor_id}");
    }
    names
        .get(actor_id)
        .cloned()
        .unwrap_or_else(|| actor_id.to_string())
}

/// A batch the database failed part-way through.
#[derive(Debug)]
pub struct Unfinished {
    /// What the events before the failure came to, in the batch's order (recorded).
    pub settled: Vec<Settled>,
    /// The failure; the events from here on were not recorded.
    pub error: StoreError,
}

/// What one event of a batch came to.
#[derive(Debug)]
pub enum Settled {
    /// Processed, and marked `done` with the batch's writes.
    Done,
    /// Its outcome is the worker's to record: a failure, or a command that ran after
    /// the batch's writes.
    Open(Result<(), ProcessError>),
}

/// One event's part of a batch.
struct Step {
    /// What it writes.
    write: Option<BatchStep>,
    /// The routed message, for what follows the write.
    routed: Option<RoutedMessage>,
    /// Why it cannot be processed.
    error: Option<ProcessError>,
}

/// What a batch reads before it routes anything: one query each, not one per event.
struct Batch {
    /// Parsed payloads by inbox id.
    parsed: HashMap<i64, Result<TypedEvent, events::ParseError>>,
    /// Message ids recalled (in the database, or earlier in the batch).
    recalled: HashSet<String>,
    /// Known display names, per profile: `open_id → name`.
    names: HashMap<String, HashMap<String, String>>,
}

impl Batch {
    async fn read(log: &dyn EventLog, events: &[InboxEvent]) -> Result<Self, StoreError> {
        let ids: Vec<String> = events
            .iter()
            .filter_map(|e| e.event.message_id.clone())
            .collect();
        let recalled = if ids.is_empty() {
            HashSet::new()
        } else {
            log.recalled_among(&ids).await?.into_iter().collect()
        };
        let parsed: HashMap<i64, _> = events
            .iter()
            .map(|e| (e.id, events::parse(&e.event.event_type, &e.event.payload)))
            .collect();
        let mut senders: HashMap<&str, Vec<String>> = HashMap::new();
        for e in events {
            if let Some(Ok(TypedEvent::MessageReceive(m))) = parsed.get(&e.id)
                && m.sender.sender_type == "user"
                && let Some(open_id) = &m.sender.sender_id.open_id
            {
                senders
                    .entry(&e.event.profile)
                    .or_default()
                    .push(open_id.clone());
            }
        }
        let mut names = HashMap::new();
        for (profile, mut open_ids) in senders {
            open_ids.sort_unstable();
            open_ids.dedup();
            let known = log.names_among(profile, &open_ids).await?;
            names.insert(profile.to_string(), known.into_iter().collect());
        }
        Ok(Self {
            parsed,
            recalled,
            names,
        })
    }
}
