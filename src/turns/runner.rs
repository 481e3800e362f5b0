//! Running one turn: claim it, gather, record the decision, hand the prompt to the
//! agent, store the answer, then deliver it (see `deliver`).

use std::{collections::HashMap, sync::Arc};

use tokio_util::sync::CancellationToken;

use super::{card::CardState, deliver::ReplyTo, job::TurnJob};
use crate::{
    agent::{Agent, AgentTurn, EchoAgent, PastTurn},
    config::{Config, WorkspaceMode},
    feishu_api::FeishuClient,
    feishu_api::identity::Identities,
    feishu_api::outbound::{Outbound, OutboundError},
    store::{NewDecision, StartedTurn, Store, StoreError, TurnStart, TurnState},
    turns::queue::SessionQueues,
    util::now_ms,
};

/// How many earlier turns of the session a conversational backend gets.
const EARLIER_TURNS: i64 = 20;

/// The newest earlier turns whose requests and answers fit in `max_chars` together
/// (oldest dropped first), oldest first.
fn within_budget(mut earlier: Vec<PastTurn>, max_chars: usize) -> Vec<PastTurn> {
    let mut total = 0usize;
    let mut keep = earlier.len();
    for (i, t) in earlier.iter().enumerate().rev() {
        total += t.request.chars().count() + t.output.chars().count();
        if total > max_chars {
            break;
        }
        keep = i;
    }
    earlier.split_off(keep)
}

/// A finished turn, broadcast for observers (tests, tools).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TurnDone {
    /// Profile.
    pub profile: String,
    /// Request message.
    pub message_id: String,
    /// The turn.
    pub turn_id: String,
    /// `answered`, `stopped`, `interrupted`, `quote_unreadable`, `agent_failed`,
    /// `failed`, `skipped` (no longer queued when its time came), `delivered` (an answer
    /// stored before a restart, posted after it).
    pub outcome: &'static str,
}

/// Runs turns.
pub struct TurnRunner {
    pub(super) config: Arc<Config>,
    pub(super) store: Arc<dyn Store>,
    pub(super) identities: Arc<Identities>,
    pub(super) clients: HashMap<String, Arc<FeishuClient>>,
    pub(super) outbound: Arc<dyn Outbound>,
    done: tokio::sync::broadcast::Sender<TurnDone>,
    agents: HashMap<String, Arc<dyn Agent>>,
    metrics: crate::telemetry::Metrics,
    /// Cancelled when the bridge shuts down: a turn cancelled then was interrupted, not
    /// stopped by its user, and a queued one stays queued for the next start.
    pub(super) shutdown: CancellationToken,
}

impl std::fmt::Debug for TurnRunner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TurnRunner")
    }
}

/// Why a turn could not run to its end.
#[derive(Debug, thiserror::Error)]
pub(super) enum TurnError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("reply not sent: {0}")]
    Outbound(#[from] OutboundError),
}

/// The parts of a runner, for [`TurnRunner::new`].
pub struct RunnerParts {
    /// Configuration.
    pub config: Arc<Config>,
    /// Store.
    pub store: Arc<dyn Store>,
    /// Bot identities.
    pub identities: Arc<Identities>,
    /// Open API clients per profile.
    pub clients: HashMap<String, Arc<FeishuClient>>,
    /// Where replies go.
    pub outbound: Arc<dyn Outbound>,
    /// Finished turns are announced here.
    pub done: tokio::sync::broadcast::Sender<TurnDone>,
    /// Agent backends per profile.
    pub agents: HashMap<String, Arc<dyn Agent>>,
    /// Cancelled at shutdown.
    pub shutdown: CancellationToken,
    /// Where finished turns are counted.
    pub metrics: crate::telemetry::Metrics,
}

impl TurnRunner {
    /// A runner over the app's parts.
    pub fn new(p: RunnerParts) -> Self {
        Self {
            config: p.config,
            store: p.store,
            identities: p.identities,
            clients: p.clients,
            outbound: p.outbound,
            done: p.done,
            agents: p.agents,
            metrics: p.metrics,
            shutdown: p.shutdown,
        }
    }

    pub(super) fn thread_limit(&self, chat_id: &str) -> usize {
        self.config
            .workspace(chat_id)
            .and_then(|w| w.thread_context_limit)
            .unwrap_or(self.config.context.thread_context_limit)
    }

    /// A per-profile context setting (`false` for a profile no longer configured).
    pub(super) fn profile_flag(
        &self,
        profile: &str,
        flag: impl Fn(&Config, &crate::config::Profile) -> bool,
    ) -> bool {
        self.config
            .profile(profile)
            .is_some_and(|p| flag(&self.config, p))
    }

    /// Queues a job behind its session's earlier turns (labelled with its turn id, so a
    /// card's stop button can name exactly this turn).
    pub fn submit(self: &Arc<Self>, queues: &SessionQueues, job: TurnJob) {
        let runner = self.clone();
        let (key, label) = (job.session_key.clone(), job.turn_id.clone());
        queues.submit(
            &key,
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
                () = tokio::time::sleep(super::persist::pause(failures)) => {}
                // It stays queued (or, if its start went through, recovery ends it).
                () = self.shutdown.cancelled() => return,
                () = cancel.cancelled() => {
                    break self.end_cancelled(&job, None).await.unwrap_or("failed");
                }
            }
            // A start whose answer was lost may have gone through: such a turn cannot be
            // resumed here (its context was gathered by the attempt that failed).
            if let Ok(Some(row)) = self.store.turn(&job.turn_id).await
                && row.state().is_ok_and(|s| s == TurnState::Running)
            {
                break self.fail(&job, &TurnError::Store(e)).await;
            }
        };
        self.announce(&job.profile, &job.message_id, &job.turn_id, outcome);
    }

    /// Ends a turn as failed and tells its user.
    async fn fail(&self, job: &TurnJob, e: &TurnError) -> &'static str {
        tracing::error!(profile = %job.profile, message_id = %job.message_id, turn_id = %job.turn_id, error = %e, "turn failed");
        let why = e.to_string();
        let ended = self
            .persist("end", &job.turn_id, || {
                self.store
                    .end_turn(&job.turn_id, TurnState::Failed, &why, now_ms())
            })
            .await;
        if let Err(e) = ended {
            tracing::error!(turn_id = %job.turn_id, error = %e, "failed turn not recorded");
        }
        let sorry = "Sorry, this request failed inside the bridge; please try again.";
        let _ = self.notify(ReplyTo::of(job), sorry).await;
        "failed"
    }

    pub(super) fn announce(
        &self,
        profile: &str,
        message_id: &str,
        turn_id: &str,
        outcome: &'static str,
    ) {
        tracing::info!(profile, message_id, turn_id, outcome, "turn finished");
        self.metrics
            .turns_finished
            .with_label_values(&[profile, outcome])
            .inc();
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
    ) -> Result<&'static str, TurnError> {
        let Some(session) = self.store.session(&job.profile, &job.session_key).await? else {
            tracing::warn!(session_key = %job.session_key, "turn for a session that no longer exists");
            self.store
                .end_turn(
                    &job.turn_id,
                    TurnState::Failed,
                    "the session no longer exists",
                    now_ms(),
                )
                .await?;
            return Ok("failed");
        };
        // Cancelled or recalled while it waited: nothing to do (a cheap read before the
        // gathering; starting it below is what settles it).
        let queued = self.store.turn(&job.turn_id).await?;
        if !queued.is_some_and(|t| t.state().is_ok_and(|s| s == TurnState::Queued)) {
            return Ok("skipped");
        }
        let thread_on =
            !job.is_dm && self.profile_flag(&job.profile, Config::shared_thread_enabled);
        let history_on =
            !job.is_dm && self.profile_flag(&job.profile, Config::group_chat_history_share);
        let mut g = self
            .gather(
                job,
                session.topic_root_prompt_delivered,
                thread_on,
                history_on,
            )
            .await?;
        let quoted_ok = self.quoted(job, &mut g).await?;
        let prompt = if quoted_ok.is_ok() {
            g.prompt(&job.request_text)
        } else {
            String::new()
        };

        let mut sources = vec![format!(",{},", job.message_id)];
        sources.extend(
            g.source_message_ids
                .iter()
                .chain(g.selected().map(|s| &s.message_id))
                .map(|m| format!("{m},")),
        );
        // The same fields as the explain record's excluded items: serialized as they are.
        let excluded: Vec<_> = g
            .thread
            .excluded
            .iter()
            .chain(&g.history.excluded)
            .collect();
        let selected = g.selected_items();
        let decision = NewDecision {
            chat_id: job.chat_id.clone(),
            root_msg_id: job.root_msg_id.clone(),
            message_id: job.message_id.clone(),
            bridge_id: job.app_id.clone(),
            bot_profile: job.profile.clone(),
            target_id: self.identities.get(&job.profile),
            workspace_mode: job
                .workspace_mode
                .map_or("dm", WorkspaceMode::as_str)
                .into(),
            mode: g.mode(thread_on, history_on),
            session_key: session.session_key.clone(),
            session_id: session.session_id.clone(),
            request_text: job.request_text.clone(),
            thread_context: g.rendered_context(),
            selected_item_ids_json: serde_json::to_string(
                &g.selected().map(|s| s.item_id).collect::<Vec<_>>(),
            )
            .unwrap_or_default(),
            selected_json: serde_json::to_string(&selected).unwrap_or_default(),
            excluded_json: serde_json::to_string(&excluded).unwrap_or_default(),
            prompt_preview: prompt.clone(),
            diagnostics_json: g.diagnostics().to_string(),
            source_message_ids: sources.concat(),
            created_at: now_ms(),
        };
        // Accepted (unless the quote is unreadable): the pending history up to this
        // snapshot is consumed together with the start, whatever the agent does next.
        let consume = g
            .history_up_to
            .filter(|_| quoted_ok.is_ok())
            .map(|up_to| (job.profile.as_str(), job.history_scope.as_str(), up_to));
        let start = TurnStart {
            turn_id: &job.turn_id,
            decision: &decision,
            consume,
            now: now_ms(),
        };
        let Some(StartedTurn {
            row_id,
            decision_id,
        }) = self.store.start_turn(&start).await?
        else {
            return Ok("skipped");
        };
        tracing::info!(profile = %job.profile, message_id = %job.message_id, turn_id = %job.turn_id, decision_id, mode = %decision.mode, "context decision recorded");

        if quoted_ok.is_err() {
            self.persist("end", &job.turn_id, || {
                self.store.end_turn(
                    &job.turn_id,
                    TurnState::Failed,
                    "the quoted message could not be read",
                    now_ms(),
                )
            })
            .await?;
            let notice = "I could not read the message you replied to (it may have been recalled \
                 or I cannot see it), so I did not send your request to the agent. Please quote it \
                 again or paste its text.";
            self.notify(ReplyTo::of(job), notice).await?;
            return Ok("quote_unreadable");
        }
        let earlier = within_budget(
            self.persist("history", &job.turn_id, || {
                self.store.session_history(
                    &job.profile,
                    &session.session_key,
                    &session.session_id,
                    row_id,
                    EARLIER_TURNS,
                )
            })
            .await?
            .into_iter()
            .filter_map(|t| {
                let output = t.output.filter(|o| !o.is_empty())?;
                (!t.request_text.is_empty()).then_some(PastTurn {
                    request: t.request_text,
                    output,
                })
            })
            .collect(),
            self.config.context.max_context_chars,
        );
        let turn = AgentTurn {
            turn_id: job.turn_id.clone(),
            sender: crate::agent::TurnSender {
                open_id: job.sender_open_id.clone(),
                name: job.sender_name.clone(),
            },
            profile: job.profile.clone(),
            session_key: session.session_key.clone(),
            session_id: session.session_id.clone(),
            chat_id: job.chat_id.clone(),
            chat_type: job.chat_type.clone(),
            root_msg_id: job.root_msg_id.clone(),
            message_id: job.message_id.clone(),
            request_text: job.request_text.clone(),
            prompt,
            context_items: g
                .selected()
                .map(|s| crate::agent::ContextItem {
                    item_type: s.item_type.clone(),
                    author_label: s.author_label.clone(),
                    text: s.text.clone(),
                    truncated: s.truncated,
                })
                .collect(),
            topic_root: g.topic_root.is_some(),
            quoted: g.quoted.is_some(),
            history: g.history.selected.len(),
            earlier,
        };
        let agent: Arc<dyn Agent> = self
            .agents
            .get(&job.profile)
            .cloned()
            .unwrap_or_else(|| Arc::new(EchoAgent));
        let (partial, _) = tokio::sync::watch::channel(String::new());
        let card = if agent.streams() {
            self.open_card(job, &partial).await
        } else {
            None
        };
        let answer = tokio::select! {
            biased;
            () = cancel.cancelled() => None,
            a = agent.run(&turn, &partial) => Some(a),
        };
        let partial_text = partial.borrow().clone();
        let card_id = match card {
            Some(c) => Some(c.finish().await),
            None => None,
        };
        let card = card_id.as_deref().map(|id| (id, partial_text.as_str()));
        let root_delivered = matches!(g.topic_root_status, "injected" | "is_request").then(|| {
            (
                job.profile.clone(),
                session.session_key.clone(),
                session.session_id.clone(),
            )
        });
        match answer {
            None => self.end_cancelled(job, card).await,
            Some(Err(e)) => {
                let why = e.to_string();
                self.persist("end", &job.turn_id, || {
                    self.store
                        .end_turn(&job.turn_id, TurnState::Failed, &why, now_ms())
                })
                .await?;
                let notice = format!("The agent did not answer: {why}");
                self.tell_ended(ReplyTo::of(job), card, CardState::Failed(&why), &notice)
                    .await?;
                Ok("agent_failed")
            }
            Some(Ok(answer)) => {
                // Stored before it is posted: a restart delivers it instead of losing it.
                self.persist("answer", &job.turn_id, || {
                    self.store.save_turn_output(&job.turn_id, &answer, now_ms())
                })
                .await?;
                self.deliver(job, card_id.as_deref(), &answer, root_delivered)
                    .await?;
                Ok("answered")
            }
        }
    }

    /// A cancelled turn: stopped by its user, or interrupted by a shutdown.
    pub(super) async fn end_cancelled(
        &self,
        job: &TurnJob,
        card: Option<(&str, &str)>,
    ) -> Result<&'static str, TurnError> {
        let (state, error, shown, notice, outcome) = if self.shutdown.is_cancelled() {
            let interrupted = super::recovery::INTERRUPTED;
            (
                TurnState::Failed,
                "interrupted: the bridge shut down",
                CardState::Failed(interrupted),
                interrupted,
                "interrupted",
            )
        } else {
            (
                TurnState::Cancelled,
                "stopped by the user",
                CardState::Stopped,
                "Stopped.",
                "stopped",
            )
        };
        self.persist("end", &job.turn_id, || {
            self.store.end_turn(&job.turn_id, state, error, now_ms())
        })
        .await?;
        self.tell_ended(ReplyTo::of(job), card, shown, notice)
            .await?;
        Ok(outcome)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn past(request: &str, output: &str) -> PastTurn {
        PastTurn {
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
