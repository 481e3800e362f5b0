//! Running one turn, in named steps: start it (gather its context, record the decision,
//! set it running), hand the prompt to the agent (streaming into a card when the
//! backend streams), and conclude (store the answer, then hand it to the [`Deliverer`];
//! or record why there is none). Runs in its session's queue.

use std::{
    collections::{HashMap, HashSet},
    sync::Arc,
};

use tokio::sync::{broadcast, mpsc, watch};
use tokio_util::sync::CancellationToken;

use super::{
    card::CardState,
    deliver::{Deliverer, INTERRUPTED},
    follow::EventFollower,
    gather::{Gathered, Gatherer},
    handoff::Handoffs,
    job::{Outcome, ReplyTo, TurnDone, TurnError, TurnJob},
    order::{SessionOrder, Waited},
    persist::{pause, persist},
    queue::SessionQueues,
    stream::Opening,
    working::{ReactionHandle, Working},
};
use crate::{
    agent::{
        Agent, AgentError, AgentTurn, Answer, ContextItem, EchoAgent, FeedSegment, HandoffPeer,
        MediaLink, PastTurn, Progress, TurnSender, events::TurnEventNote,
    },
    config::Config,
    feed::Feed,
    feishu_api::{
        FeishuClient,
        identity::Identities,
        outbound::{Outbound, PostedCard},
    },
    store::{
        HistoryQuery, SessionRow, SessionStore, StartedTurn, Store, TurnLeases, TurnStart,
        TurnState, TurnStore,
    },
    telemetry::Metrics,
    util::UnixMs,
};

/// How many earlier turns of the session a conversational backend gets.
const EARLIER_TURNS: i64 = 20;

/// What a user is told when the message they quoted cannot be read.
const QUOTE_UNREADABLE: &str = "I could not read the message you replied to (it may have \
     been recalled or I cannot see it), so I did not send your request to the agent. Please \
     quote it again or paste its text.";

/// Runs turns.
pub struct TurnRunner {
    config: Arc<Config>,
    sessions: Arc<dyn SessionStore>,
    store: Arc<dyn TurnStore>,
    leases: Arc<dyn TurnLeases>,
    identities: Arc<Identities>,
    gatherer: Gatherer,
    deliverer: Arc<Deliverer>,
    agents: HashMap<String, Arc<dyn Agent>>,
    feed: Arc<Feed>,
    done: broadcast::Sender<TurnDone>,
    metrics: Metrics,
    /// Cancelled when the bridge shuts down: a turn cancelled then was interrupted, not
    /// stopped by its user, and a queued one stays queued for the next start.
    shutdown: CancellationToken,
    /// This replica's name on the turns it queues and runs.
    owner: String,
    /// Waits for a session's earlier turns on other replicas.
    order: SessionOrder,
    /// Reads what agents report while their turns run.
    follower: EventFollower,
    /// The reaction on a running turn's request.
    working: Arc<Working>,
    /// Where handoff turns go to be queued.
    handed_tx: mpsc::UnboundedSender<TurnJob>,
    handed_rx: std::sync::Mutex<Option<mpsc::UnboundedReceiver<TurnJob>>>,
}

impl std::fmt::Debug for TurnRunner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TurnRunner")
    }
}

/// The parts of a runner, for [`TurnRunner::new`].
pub struct RunnerParts {
    /// The configuration.
    pub config: Arc<Config>,
    /// The database.
    pub store: Arc<dyn Store>,
    /// Each profile's own bot identity.
    pub identities: Arc<Identities>,
    /// Open API clients per profile (reading messages the store never saw).
    pub clients: HashMap<String, Arc<FeishuClient>>,
    /// Where replies go.
    pub outbound: Arc<dyn Outbound>,
    /// Where finished turns are announced.
    pub done: broadcast::Sender<TurnDone>,
    /// Agent backends per profile.
    pub agents: HashMap<String, Arc<dyn Agent>>,
    /// The batched feed (the segments a turn uses).
    pub feed: Arc<Feed>,
    /// Cancelled at shutdown.
    pub shutdown: CancellationToken,
    /// Where finished turns are counted.
    pub metrics: Metrics,
    /// Senders' names in the turn's context.
    pub names: Arc<crate::names::Names>,
    /// Where stored turn events are announced (a turn's card shows them).
    pub turn_events: broadcast::Sender<TurnEventNote>,
    /// The reaction on a running turn's request.
    pub working: Arc<Working>,
}

/// A turn that started: its session, what was gathered, its prompt, its row.
struct Started {
    session: SessionRow,
    /// The batched-feed segments the turn is given (read once it succeeds).
    feed: Vec<FeedSegment>,
    gathered: Gathered,
    prompt: String,
    row_id: i64,
    quote_readable: bool,
    /// The reaction on its request while it runs (taken off when this is dropped).
    reaction: Option<ReactionHandle>,
}

/// What the agent did with a turn; `None` when the turn was cancelled first.
struct Asked {
    answer: Option<Result<Answer, AgentError>>,
    /// The streaming card and what the turn showed last.
    card: Option<(PostedCard, Progress)>,
}

impl TurnRunner {
    /// A runner over the app's parts.
    pub fn new(p: RunnerParts) -> Self {
        let handoffs = Handoffs::new(
            p.config.clone(),
            p.store.clone(),
            p.identities.clone(),
            p.outbound.clone(),
            p.metrics.clone(),
            p.shutdown.clone(),
        );
        let deliverer = Deliverer::new(
            p.config.clone(),
            p.store.clone(),
            p.identities.clone(),
            p.outbound,
            p.shutdown.clone(),
            handoffs,
        );
        let (handed_tx, handed_rx) = mpsc::unbounded_channel();
        let gatherer = Gatherer::new(
            p.config.clone(),
            p.store.clone(),
            p.clients,
            p.identities.clone(),
        )
        .with_names(p.names.clone());
        let order = SessionOrder {
            leases: p.store.clone(),
            done: p.done.clone(),
            poll: std::time::Duration::from_millis(p.config.worker.replica_poll_ms.max(1)),
            shutdown: p.shutdown.clone(),
        };
        let follower = EventFollower {
            store: p.store.clone(),
            notes: p.turn_events,
            names: p.names.clone(),
        };
        Self {
            owner: p.config.replica_id(),
            order,
            follower,
            config: p.config,
            sessions: p.store.clone(),
            leases: p.store.clone(),
            store: p.store,
            identities: p.identities,
            gatherer,
            deliverer: Arc::new(deliverer),
            agents: p.agents,
            feed: p.feed,
            done: p.done,
            metrics: p.metrics,
            shutdown: p.shutdown,
            working: p.working,
            handed_tx,
            handed_rx: std::sync::Mutex::new(Some(handed_rx)),
        }
    }

    /// The handoff turns this runner's answers queued, to be submitted to the session
    /// queues (taken once, by whoever runs the queues).
    pub fn take_handoffs(&self) -> Option<mpsc::UnboundedReceiver<TurnJob>> {
        self.handed_rx
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
    }

    /// Hands a queued handoff turn over to be run here (its row is queued and owned by
    /// this replica, so recovery runs it should this never get to it).
    pub(super) fn hand_over(&self, job: TurnJob) {
        tracing::info!(profile = %job.profile, turn_id = %job.turn_id, session_key = %job.session_key, "handoff turn queued");
        let _ = self.handed_tx.send(job);
    }

    /// Who owns which turn.
    pub(super) fn leases(&self) -> &Arc<dyn TurnLeases> {
        &self.leases
    }

    /// This replica's name on its turns (`worker.replica_id`).
    pub fn owner(&self) -> &str {
        &self.owner
    }

    /// The reaction on running turns' requests.
    pub(super) fn working(&self) -> &Arc<Working> {
        &self.working
    }

    /// What tells users about turns (recovery delivers stored answers through it).
    pub(super) fn deliverer(&self) -> &Deliverer {
        &self.deliverer
    }

    /// Queues a job behind its session's earlier turns (labelled with its turn id, so a
    /// card's stop button can name exactly this turn).
    pub fn submit(self: &Arc<Self>, queues: &SessionQueues, job: TurnJob) {
        let key = job.session_key.clone();
        self.submit_under(queues, &key, job);
    }

    /// Queues a job in the session queue `key`.
    pub(super) fn submit_under(self: &Arc<Self>, queues: &SessionQueues, key: &str, job: TurnJob) {
        let runner = self.clone();
        let label = job.turn_id.clone();
        queues.submit(
            key,
            &label,
            Box::new(move |cancel| Box::pin(async move { runner.run(job, cancel).await })),
        );
    }

    /// Runs one turn; errors are logged, recorded on the turn, and the user is told. While
    /// the database fails before the turn has started, the turn waits in its session's
    /// queue and tries again (its order kept); nothing has reached the agent yet.
    pub async fn run(&self, job: TurnJob, cancel: CancellationToken) {
        if self.shutdown.is_cancelled() {
            // Shutting down: it stays queued and runs after the next start.
            return;
        }
        match self.order.wait(&job, &cancel).await {
            Waited::Go => {}
            Waited::Shutdown => return,
            Waited::Cancelled => {
                let outcome = self.end_cancelled(&job, None).await;
                let outcome = outcome.unwrap_or(Outcome::Failed);
                self.announce(&job.profile, &job.message_id, &job.turn_id, outcome);
                return;
            }
        }
        let mut failures = 0u32;
        let outcome = loop {
            let e = match self.try_run(&job, &cancel).await {
                Ok(outcome) => break outcome,
                Err(TurnError::Store(e)) if e.database_failed() => e,
                Err(e) => break self.fail(&job, &e).await,
            };
            failures += 1;
            if failures == 1 {
                tracing::warn!(profile = %job.profile, turn_id = %job.turn_id, error = %e, "the database failed before the turn started; it will try again");
            }
            tokio::select! {
                () = tokio::time::sleep(pause(failures)) => {}
                // It stays queued (or, if its start went through, recovery ends it).
                () = self.shutdown.cancelled() => return,
                () = cancel.cancelled() => {
                    break self.end_cancelled(&job, None).await.unwrap_or(Outcome::Failed);
                }
            }
            // A start whose answer was lost may have gone through: such a turn cannot be
            // resumed here (its context was gathered by the attempt that failed).
            if let Ok(Some(row)) = self.store.turn(&job.turn_id).await
                && row.state == TurnState::Running
            {
                break self.fail(&job, &TurnError::Store(e)).await;
            }
        };
        if job.chain.is_some() && outcome == Outcome::Skipped {
            // A handoff turn no longer queued when its time came: `/stop` cancelled it.
            self.deliverer.handoff_cancelled();
        }
        self.announce(&job.profile, &job.message_id, &job.turn_id, outcome);
    }

    /// Logs, counts and broadcasts how a turn ended.
    pub(super) fn announce(
        &self,
        profile: &str,
        message_id: &str,
        turn_id: &str,
        outcome: Outcome,
    ) {
        tracing::info!(profile, message_id, turn_id, %outcome, "turn finished");
        self.metrics
            .turns_finished
            .with_label_values(&[profile, outcome.as_str()])
            .inc();
        // Nobody listening is fine: the broadcast is for observers only.
        let _ = self.done.send(TurnDone {
            profile: profile.to_string(),
            message_id: message_id.to_string(),
            turn_id: turn_id.to_string(),
            outcome,
        });
    }

    async fn try_run(
        &self,
        job: &TurnJob,
        cancel: &CancellationToken,
    ) -> Result<Outcome, TurnError> {
        let started = match self.start(job).await? {
            Ok(started) => started,
            Err(outcome) => return Ok(outcome),
        };
        if !started.quote_readable {
            self.deliverer
                .end(
                    &job.turn_id,
                    TurnState::Failed,
                    "the quoted message could not be read",
                )
                .await?;
            self.deliverer
                .notify(ReplyTo::of(job), QUOTE_UNREADABLE)
                .await?;
            return Ok(Outcome::QuoteUnreadable);
        }
        let turn = self.agent_turn(job, &started).await?;
        let asked = self.ask(job, &turn, cancel).await;
        // Answered: the feed segments it carried are read (a failed or cancelled turn
        // leaves them for the next).
        if matches!(asked.answer, Some(Ok(_)))
            && let Err(e) = self
                .feed
                .read(&job.profile, &started.session, &started.feed, &job.turn_id)
                .await
        {
            tracing::warn!(turn_id = %job.turn_id, reason = %e.reason(), "feed segments not marked read; the next turn gets them again");
        }
        let outcome = self.conclude(job, &started, asked).await;
        self.working.end(started.reaction);
        outcome
    }

    /// Starts a turn: its session, its context, its decision, all recorded with the
    /// turn set running (and the pending history it consumes) in one transaction.
    /// `Err(outcome)` when it does not start.
    async fn start(&self, job: &TurnJob) -> Result<Result<Started, Outcome>, TurnError> {
        let Some(session) = self
            .sessions
            .session(&job.profile, &job.session_key)
            .await?
        else {
            tracing::warn!(session_key = %job.session_key, "turn for a session that no longer exists");
            self.store
                .end_turn(
                    &job.turn_id,
                    TurnState::Failed,
                    "the session no longer exists",
                    UnixMs::now(),
                )
                .await?;
            return Ok(Err(Outcome::Failed));
        };
        // Cancelled or recalled while it waited: nothing to do (a cheap read before the
        // gathering; starting it below is what settles it).
        let queued = self.store.turn(&job.turn_id).await?;
        if !queued.is_some_and(|t| t.state == TurnState::Queued) {
            return Ok(Err(Outcome::Skipped));
        }
        let thread_on = !job.is_dm
            && self
                .gatherer
                .profile_flag(&job.profile, Config::shared_thread_enabled);
        let history_on = !job.is_dm
            && self
                .gatherer
                .profile_flag(&job.profile, Config::group_chat_history_share);
        let delivered = session.topic_root_prompt_delivered;
        let feed = self.feed_of(job, &session).await;
        let in_feed: HashSet<&str> = feed
            .iter()
            .flat_map(|s| s.message_ids.iter().map(String::as_str))
            .collect();
        let mut gathered = self
            .gatherer
            .gather(job, delivered, (thread_on, history_on), &in_feed)
            .await?;
        let quote_readable = self.gatherer.quoted(job, &mut gathered).await?.is_ok();
        if quote_readable {
            self.gatherer.media(job, &mut gathered).await;
        }
        let prompt = if quote_readable {
            gathered.prompt(&job.request_text)
        } else {
            String::new()
        };
        let target = self.identities.get(&job.profile);
        let decision = gathered.decision(job, &session, target, &prompt, (thread_on, history_on));
        // Accepted (unless the quote is unreadable): the pending history up to this
        // snapshot is consumed together with the start, whatever the agent does next.
        let consume = gathered
            .history_up_to
            .filter(|_| quote_readable)
            .map(|up_to| (job.profile.as_str(), job.history_scope.as_str(), up_to));
        let start = TurnStart {
            turn_id: &job.turn_id,
            decision: &decision,
            consume,
            now: UnixMs::now(),
            owner: &self.owner,
        };
        let Some(StartedTurn {
            row_id,
            decision_id,
        }) = self.store.start_turn(&start).await?
        else {
            return Ok(Err(Outcome::Skipped));
        };
        tracing::info!(profile = %job.profile, message_id = %job.message_id, turn_id = %job.turn_id, decision_id, mode = %decision.mode, "context decision recorded");
        let reaction = match quote_readable {
            true => self.working.begin(job).await,
            false => None,
        };
        Ok(Ok(Started {
            session,
            feed,
            gathered,
            prompt,
            row_id,
            quote_readable,
            reaction,
        }))
    }

    /// What the agent is handed: the prompt, the selected items, and the session's
    /// earlier turns that fit the context budget.
    async fn agent_turn(&self, job: &TurnJob, s: &Started) -> Result<AgentTurn, TurnError> {
        let query = HistoryQuery {
            profile: &job.profile,
            session_key: &s.session.session_key,
            session_id: &s.session.session_id,
            before_id: s.row_id,
            limit: EARLIER_TURNS,
        };
        let history = persist(&self.shutdown, "history", &job.turn_id, || {
            self.store.session_history(&query)
        })
        .await?;
        let feed_on = self.feed_on(job);
        let mut earlier = Vec::with_capacity(history.len());
        for t in history {
            let Some(output) = t.output.filter(|o| !o.is_empty()) else {
                continue;
            };
            if t.request_text.is_empty() {
                continue;
            }
            // The segments that turn read stay in the session's history with it.
            let feed = if feed_on {
                self.feed_read_by(&t.turn_id).await
            } else {
                Vec::new()
            };
            earlier.push(PastTurn {
                feed,
                request: s.gathered.carry.replayed(&t.turn_id, t.request_text),
                output,
            });
        }
        let feed = s.feed.clone();
        let g = &s.gathered;
        Ok(AgentTurn {
            kind: "turn",
            turn_id: job.turn_id.clone(),
            sender: TurnSender {
                open_id: job.sender_open_id.clone(),
                name: g.requester.clone(),
            },
            profile: job.profile.clone(),
            session_key: s.session.session_key.clone(),
            session_id: s.session.session_id.clone(),
            chat_id: job.chat_id.clone(),
            chat_type: job.chat_type.to_string(),
            root_msg_id: job.root_msg_id.clone(),
            message_id: job.message_id.clone(),
            request_text: job.request_text.clone(),
            prompt: s.prompt.clone(),
            context_items: g
                .selected()
                .map(|s| ContextItem {
                    item_type: s.item_type.to_string(),
                    author_label: s.author_label.clone(),
                    text: s.text.clone(),
                    truncated: s.truncated,
                })
                .chain(
                    g.media
                        .items
                        .iter()
                        .filter(|i| i.inlined())
                        .map(|i| ContextItem {
                            item_type: i.item_type.to_string(),
                            author_label: i.label.clone(),
                            text: i.text.clone(),
                            truncated: i.truncated,
                        }),
                )
                .collect(),
            media: self.media_links(job, &g.media),
            images: g
                .media
                .items
                .iter()
                .filter_map(|i| i.image.clone())
                .collect(),
            topic_root: g.topic_root.is_some(),
            quoted: g.quoted.is_some(),
            history: g.history.selected.len(),
            feed_segment_ids: feed.iter().map(|s| s.segment_id).collect(),
            feed,
            earlier: within_budget(earlier, self.config.context.max_context_chars),
            handoff_peers: self.handoff_peers(job),
        })
    }

    /// The hub's other profiles whose bots are known, when this turn's answer may hand
    /// over (a group chat, handoffs on).
    fn handoff_peers(&self, job: &TurnJob) -> Vec<HandoffPeer> {
        if job.is_dm || !self.config.handoff.enabled {
            return Vec::new();
        }
        self.config
            .profiles
            .iter()
            .filter(|p| p.name != job.profile)
            .filter_map(|p| {
                let open_id = self.identities.get(&p.name)?;
                Some(HandoffPeer {
                    profile: p.name.clone(),
                    open_id,
                })
            })
            .collect()
    }

    /// The feed segments attached to the turn's session (group chats whose feed is on);
    /// none when the feed cannot be read — background is never worth failing a turn.
    async fn feed_of(&self, job: &TurnJob, session: &SessionRow) -> Vec<FeedSegment> {
        if !self.feed_on(job) {
            return Vec::new();
        }
        match self.feed.for_turn(&job.profile, session).await {
            Ok(segments) => segments,
            Err(e) => {
                tracing::warn!(turn_id = %job.turn_id, reason = %e.reason(), "feed segments not read; the turn goes on without them");
                Vec::new()
            }
        }
    }

    /// Signed URLs of the turn's images and files, for a profile whose agent has a secret
    /// to sign them with.
    fn media_links(&self, job: &TurnJob, media: &crate::context::media::Media) -> Vec<MediaLink> {
        use secrecy::ExposeSecret;
        let secret = self
            .config
            .profile(&job.profile)
            .and_then(|p| p.agent.secret.as_ref())
            .map(|s| s.expose_secret().to_string())
            .filter(|s| !s.is_empty());
        let Some(secret) = secret else {
            return Vec::new();
        };
        let m = &self.config.media;
        crate::media::links(
            media,
            (&job.profile, &secret),
            m.public_url.as_deref(),
            crate::util::now_secs(),
            m.url_ttl_secs,
        )
    }

    /// Whether the turn's chat has the batched feed on for its profile.
    fn feed_on(&self, job: &TurnJob) -> bool {
        !job.is_dm
            && self
                .config
                .profile(&job.profile)
                .is_some_and(|p| self.config.feed_enabled(p, &job.chat_id))
    }

    /// The texts of the feed segments an earlier turn read; none when they cannot be
    /// read (background is never worth failing a turn).
    async fn feed_read_by(&self, turn_id: &str) -> Vec<String> {
        match self.feed.read_by(turn_id).await {
            Ok(segments) => segments.into_iter().map(|s| s.text).collect(),
            Err(e) => {
                tracing::warn!(turn_id, reason = %e.reason(), "an earlier turn's feed segments not read; left out of the history");
                Vec::new()
            }
        }
    }

    /// Hands the turn to its agent, until it answers or the turn is cancelled: a
    /// streaming backend's answer grows in a card posted at once; an agent reporting
    /// turn events gets a card with the first thing it shows.
    async fn ask(&self, job: &TurnJob, turn: &AgentTurn, cancel: &CancellationToken) -> Asked {
        let agent: Arc<dyn Agent> = self
            .agents
            .get(&job.profile)
            .cloned()
            .unwrap_or_else(|| Arc::new(EchoAgent));
        let (partial, _) = watch::channel(Progress::default());
        let reports = agent.reports_events();
        let opening = if agent.streams() {
            Some(Opening::Now)
        } else {
            reports.then_some(Opening::FirstShown)
        };
        let card = match opening {
            Some(o) => Some(self.deliverer.open_card(job, &partial, o).await),
            None => None,
        };
        let following = reports.then(|| {
            let interval = self.deliverer.card_interval(&job.profile);
            self.follower
                .follow(&job.profile, &job.turn_id, &partial, interval)
        });
        let answer = tokio::select! {
            biased;
            () = cancel.cancelled() => None,
            a = agent.run(turn, &partial) => Some(a),
        };
        if let Some(following) = following {
            following.stop().await;
        }
        let card = match card {
            Some(c) => c.finish().await,
            None => None,
        };
        // What the final card keeps: the events as stored by now, or what was streamed.
        let shown = if reports {
            self.shown(&job.profile, &job.turn_id).await
        } else {
            partial.borrow().clone()
        };
        Asked {
            answer,
            card: card.map(|c| (c, shown)),
        }
    }

    /// What a turn's events show (nothing, when they cannot be read).
    pub(super) async fn shown(&self, profile: &str, turn_id: &str) -> Progress {
        match self.follower.progress(profile, turn_id).await {
            Ok(p) => p,
            Err(e) => {
                tracing::warn!(turn_id, error = %e, "turn events not read; the card shows the answer alone");
                Progress::default()
            }
        }
    }

    /// Records and tells what became of the turn: its answer stored, then delivered; or
    /// why there is none.
    async fn conclude(
        &self,
        job: &TurnJob,
        s: &Started,
        asked: Asked,
    ) -> Result<Outcome, TurnError> {
        let card = asked.card.as_ref().map(|(posted, shown)| (posted, shown));
        match asked.answer {
            None => self.end_cancelled(job, card).await,
            Some(Err(e)) => {
                let why = e.to_string();
                self.deliverer
                    .end(&job.turn_id, TurnState::Failed, &why)
                    .await?;
                let notice = format!("The agent did not answer: {why}");
                self.deliverer
                    .tell_ended(ReplyTo::of(job), card, CardState::Failed(&why), &notice)
                    .await?;
                Ok(Outcome::AgentFailed)
            }
            Some(Ok(answer)) => {
                let ask = answer
                    .handoff
                    .as_ref()
                    .and_then(|h| serde_json::to_string(h).ok());
                // Stored before it is posted: a restart delivers it instead of losing it.
                persist(&self.shutdown, "answer", &job.turn_id, || {
                    self.store.save_turn_output(
                        &job.turn_id,
                        &answer.text,
                        ask.as_deref(),
                        UnixMs::now(),
                    )
                })
                .await?;
                let plan = self
                    .deliverer
                    .plan_handoff(
                        job,
                        &answer.text,
                        answer.handoff.as_ref(),
                        s.gathered.requester.as_deref(),
                    )
                    .await?;
                let root_delivered =
                    matches!(s.gathered.topic_root_status, "injected" | "is_request").then(|| {
                        (
                            job.profile.clone(),
                            s.session.session_key.clone(),
                            s.session.session_id.clone(),
                        )
                    });
                let next = self
                    .deliverer
                    .deliver(job, card, &answer.text, root_delivered, plan.as_ref())
                    .await?;
                if let Some(next) = next {
                    self.hand_over(next);
                }
                Ok(Outcome::Answered)
            }
        }
    }

    /// Ends a turn as failed and tells its user.
    async fn fail(&self, job: &TurnJob, e: &TurnError) -> Outcome {
        tracing::error!(profile = %job.profile, message_id = %job.message_id, turn_id = %job.turn_id, error = %e, "turn failed");
        let why = e.to_string();
        if let Err(e) = self
            .deliverer
            .end(&job.turn_id, TurnState::Failed, &why)
            .await
        {
            tracing::error!(turn_id = %job.turn_id, error = %e, "failed turn not recorded");
        }
        let sorry = "Sorry, this request failed inside the bridge; please try again.";
        if let Err(e) = self.deliverer.notify(ReplyTo::of(job), sorry).await {
            tracing::warn!(turn_id = %job.turn_id, error = %e, "failed turn's user not told");
        }
        Outcome::Failed
    }

    /// A cancelled turn: stopped by its user, or interrupted by a shutdown.
    async fn end_cancelled(
        &self,
        job: &TurnJob,
        card: Option<(&PostedCard, &Progress)>,
    ) -> Result<Outcome, TurnError> {
        let (state, error, shown, notice, outcome) = if self.shutdown.is_cancelled() {
            (
                TurnState::Failed,
                "interrupted: the bridge shut down",
                CardState::Failed(INTERRUPTED),
                INTERRUPTED,
                Outcome::Interrupted,
            )
        } else {
            (
                TurnState::Cancelled,
                "stopped by the user",
                CardState::Stopped,
                "Stopped.",
                Outcome::Stopped,
            )
        };
        self.deliverer.end(&job.turn_id, state, error).await?;
        self.deliverer
            .tell_ended(ReplyTo::of(job), card, shown, notice)
            .await?;
        Ok(outcome)
    }
}

/// The newest earlier turns whose requests and answers fit in `max_chars` together
/// (oldest dropped first), oldest first.
fn within_budget(mut earlier: Vec<PastTurn>, max_chars: usize) -> Vec<PastTurn> {
    let mut total = 0usize;
    let mut keep = earlier.len();
    for (i, t) in earlier.iter().enumerate().rev() {
        let feed: usize = t.feed.iter().map(|f| f.chars().count()).sum();
        total += feed + t.request.chars().count() + t.output.chars().count();
        if total > max_chars {
            break;
        }
        keep = i;
    }
    earlier.split_off(keep)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn past(request: &str, output: &str) -> PastTurn {
        PastTurn {
            feed: Vec::new(),
            request: request.into(),
            output: output.into(),
        }
    }

    #[test]
    fn earlier_turns_keep_the_newest_that_fit() {
        let turns = vec![past("aaaa", "bbbb"), past("cc", "dd"), past("e", "f")];
        assert_eq!(within_budget(turns.clone(), 100), turns);
        assert_eq!(within_budget(turns.clone(), 6), turns[1..].to_vec());
        assert_eq!(within_budget(turns.clone(), 5), turns[2..].to_vec());
        assert!(within_budget(turns, 1).is_empty());
    }
}
