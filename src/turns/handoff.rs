//! Handing work from one profile's answer to another profile's turn, in the same thread.
//!
//! Before the answer is posted, the [`Plan`]: the target (the structured `handoff` field
//! of the agent's output, else the first `<at>` in the answer of another profile's bot),
//! the chain it continues, and whether it runs — the person who started the chain must
//! be allowed to invoke the target in that chat, and the loop guard must let it through.
//! Once the answer is posted, its completion writes the handoff in the same transaction
//! (the target's verdict naming the chain, and for a started one its session and queued
//! turn, whose id derives from the handing turn and the target, so it is queued once).
//! After that commit a chain that stops here says so once in the thread.

use std::{sync::Arc, time::Duration};

use tokio_util::sync::CancellationToken;

use super::{job::TurnJob, persist::persist};
use crate::{
    agent::HandoffAsk,
    config::{Config, Profile},
    feishu_api::{
        identity::Identities,
        outbound::{Format, Outbound, Reply},
    },
    routing::{
        Chain, HandoffOutcome, Place, Reason, Requester, Verdict, Via, admit, mentioned_ids,
        plain_mentions,
    },
    store::{HandoffRow, HandoffWrite, NewSession, ReplyKind, Store, StoreError},
    telemetry::Metrics,
    util::{UnixMs, new_session_id},
    vocab::ChatType,
};

/// The span of a thread's handoff budget.
const BUDGET_SPAN: Duration = Duration::from_secs(3600);

/// A handoff an answer asks for, decided before the answer is posted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Plan {
    /// The chain the target would run in.
    chain: Chain,
    /// The target profile.
    target: String,
    /// Whether it runs, and if not, why.
    outcome: HandoffOutcome,
    /// Why the person may not invoke the target (a refusal).
    refused: Option<Reason>,
    /// What the target is asked.
    request_text: String,
}

/// Decides, writes and tells handoffs.
pub(super) struct Handoffs {
    config: Arc<Config>,
    store: Arc<dyn Store>,
    identities: Arc<Identities>,
    outbound: Arc<dyn Outbound>,
    metrics: Metrics,
    shutdown: CancellationToken,
}

impl Handoffs {
    /// Handoffs over the app's parts.
    pub(super) fn new(
        config: Arc<Config>,
        store: Arc<dyn Store>,
        identities: Arc<Identities>,
        outbound: Arc<dyn Outbound>,
        metrics: Metrics,
        shutdown: CancellationToken,
    ) -> Self {
        Self {
            config,
            store,
            identities,
            outbound,
            metrics,
            shutdown,
        }
    }

    /// The handoff `job`'s answer asks for, if any: `requester` is the person's name as
    /// the turn knew it.
    pub(super) async fn plan(
        &self,
        job: &TurnJob,
        answer: &str,
        ask: Option<&HandoffAsk>,
        requester: Option<&str>,
    ) -> Result<Option<Plan>, StoreError> {
        if !self.config.handoff.enabled || job.is_dm {
            return Ok(None);
        }
        let Some((profile, via)) = self.target(job, answer, ask) else {
            return Ok(None);
        };
        let root = Requester {
            open_id: job.sender_open_id.clone(),
            union_id: job.sender_union_id.clone(),
            user_id: job.sender_user_id.clone(),
            name: requester.map(str::to_string).or(job.sender_name.clone()),
        };
        let parent = (job.turn_id.as_str(), job.profile.as_str());
        let chain = Chain::next(job.chain.as_ref(), parent, root, &profile.name, via);
        let request_text = match ask.filter(|_| via == Via::Field) {
            Some(a) => a.text.clone(),
            None => plain_mentions(answer),
        };
        let workspace = self.config.workspace(&job.chat_id);
        let refused = admit(profile, workspace, &job.chat_id, &chain.root).err();
        let outcome = match refused {
            Some(_) => HandoffOutcome::Refused,
            None => {
                let since = UnixMs::now() - BUDGET_SPAN;
                let started = persist(&self.shutdown, "handoff budget", &job.turn_id, || {
                    self.store
                        .handoffs_started_since(&job.chat_id, &job.root_msg_id, since)
                })
                .await?;
                let guard = crate::routing::Guard {
                    max_hops: self.config.handoff.max_hops,
                    thread_budget_per_hour: self.config.handoff.thread_budget_per_hour,
                };
                guard
                    .check(&chain, started)
                    .map_or_else(|cut| cut, |()| HandoffOutcome::Started)
            }
        };
        Ok(Some(Plan {
            target: profile.name.clone(),
            chain,
            outcome,
            refused,
            request_text,
        }))
    }

    /// The profile an answer hands to, and how: the structured field's profile, else
    /// the first `<at>` of another profile's bot. Neither this profile nor a bot that is
    /// no profile of the hub.
    fn target(
        &self,
        job: &TurnJob,
        answer: &str,
        ask: Option<&HandoffAsk>,
    ) -> Option<(&Profile, Via)> {
        let other = |name: &str| self.config.profile(name).filter(|p| p.name != job.profile);
        if let Some(p) = ask.and_then(|a| other(&a.profile)) {
            return Some((p, Via::Field));
        }
        mentioned_ids(answer).iter().find_map(|id| {
            self.config
                .profiles
                .iter()
                .filter(|p| p.name != job.profile)
                .find(|p| self.identities.get(&p.name).as_deref() == Some(id.as_str()))
                .map(|p| (p, Via::Mention))
        })
    }

    /// What the completion of `job` writes for `plan`, its answer posted as
    /// `answer_id`; with the target's job when it runs.
    pub(super) fn write(
        &self,
        job: &TurnJob,
        plan: &Plan,
        answer_id: &str,
        now: UnixMs,
    ) -> (HandoffWrite, Option<TurnJob>) {
        let c = &plan.chain;
        let next = (plan.outcome == HandoffOutcome::Started)
            .then(|| self.config.profile(&plan.target))
            .flatten()
            .map(|p| self.job_for(job, plan, p, answer_id));
        let verdict = match &next {
            Some(_) => Verdict::Invoked,
            None => Verdict::Ignored,
        };
        let record = HandoffRow {
            turn_id: c.turn_id(),
            chain_id: c.chain_id.clone(),
            hop: i64::from(c.hop),
            parent_turn_id: c.parent_turn_id.clone(),
            from_profile: c.from_profile.clone(),
            to_profile: plan.target.clone(),
            chat_id: job.chat_id.clone(),
            root_msg_id: job.root_msg_id.clone(),
            message_id: answer_id.to_string(),
            root_open_id: c.root.open_id.clone(),
            root_name: c.root.name.clone(),
            path: c.path_text(),
            via: c.via.to_string(),
            outcome: plan.outcome.to_string(),
            created_at: now,
        };
        let write = HandoffWrite {
            verdict,
            reason: plan.outcome.reason(plan.refused),
            session: next.as_ref().map(|n| NewSession {
                profile: n.profile.clone(),
                session_key: n.session_key.clone(),
                session_id: new_session_id(),
                chat_id: n.chat_id.clone(),
                chat_type: ChatType::Group,
                user_id: Some(n.sender_open_id.clone()),
                root_msg_id: Some(n.root_msg_id.clone()),
                history_scope: n.history_scope.clone(),
                now,
            }),
            turn: next
                .as_ref()
                .map(|n| n.to_new_turn(now, &self.config.replica_id())),
            record,
        };
        (write, next)
    }

    /// The target's turn: in the handing turn's thread, on behalf of the chain's person,
    /// its request the answer that handed over.
    fn job_for(&self, job: &TurnJob, plan: &Plan, target: &Profile, answer_id: &str) -> TurnJob {
        let c = &plan.chain;
        // The answer is a reply in the thread of the handing turn's request.
        let place = Place {
            chat_id: job.chat_id.clone(),
            is_dm: false,
            root_msg_id: job.root_msg_id.clone(),
            in_thread: true,
        };
        TurnJob {
            turn_id: c.turn_id(),
            profile: target.name.clone(),
            app_id: target.app_id.clone(),
            session_key: place.session_key(target, &c.root.open_id),
            chat_id: job.chat_id.clone(),
            chat_type: ChatType::Group,
            is_dm: false,
            root_msg_id: job.root_msg_id.clone(),
            thread_id: job.thread_id.clone(),
            message_id: answer_id.to_string(),
            parent_id: None,
            request_text: plan.request_text.clone(),
            sender_open_id: c.root.open_id.clone(),
            sender_name: c.root.name.clone(),
            history_scope: place.history_scope(target),
            workspace_mode: Some(
                self.config
                    .workspace(&job.chat_id)
                    .map(|w| w.mode)
                    .unwrap_or_default(),
            ),
            sender_union_id: c.root.union_id.clone(),
            sender_user_id: c.root.user_id.clone(),
            chain: Some(c.clone()),
        }
    }

    /// After the completion committed: counts the handoff and, for a chain that stops
    /// here, says so once in the thread (a reply to the answer; its uuid derives from
    /// the turn and the text, so a repeat posts nothing new).
    pub(super) async fn settle(&self, job: &TurnJob, plan: &Plan, answer_id: &str) {
        let outcome = plan.outcome;
        tracing::info!(profile = %job.profile, turn_id = %job.turn_id, chain_id = %plan.chain.chain_id, hop = plan.chain.hop, to = %plan.target, %outcome, "handoff");
        self.metrics
            .handoffs
            .with_label_values(&[outcome.as_str()])
            .inc();
        let Some(note) = outcome.note(
            &job.profile,
            &plan.target,
            plan.chain.root.label(),
            self.config.handoff.max_hops,
        ) else {
            return;
        };
        let reply = Reply {
            profile: job.profile.clone(),
            chat_id: job.chat_id.clone(),
            reply_to: Some(answer_id.to_string()),
            in_thread: true,
            kind: ReplyKind::Notice,
            text: note,
            turn_id: Some(job.turn_id.clone()),
            format: Format::Text,
        };
        if let Err(e) = self.outbound.send(reply).await {
            tracing::warn!(turn_id = %job.turn_id, error = %e, "the handoff's note was not posted");
        }
    }

    /// Counts a queued handoff turn that `/stop` cancelled before it ran.
    pub(super) fn cancelled(&self) {
        self.metrics
            .handoffs
            .with_label_values(&[HandoffOutcome::Cancelled.as_str()])
            .inc();
    }

    /// Whether the target's turn of `next` is queued (its completion wrote it).
    pub(super) async fn queued(&self, next: &TurnJob) -> bool {
        matches!(
            self.store.turn(&next.turn_id).await,
            Ok(Some(t)) if t.state == crate::store::TurnState::Queued
        )
    }
}
