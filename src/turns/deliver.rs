//! Telling a turn's user: delivering its answer (as a text reply in the request's
//! thread, or as the final state of its streaming card, then recording it — the
//! `agent_output` event, the topic root flag and the turn's success — in one
//! transaction), posting its streaming card, and telling how a turn ended without one.

use std::{sync::Arc, time::Duration};

use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::{
    card::{CardState, fitting_beside, progress_card, room_beside},
    handoff::{Handoffs, Plan},
    job::{ReplyTo, TurnError, TurnJob},
    persist::persist,
    stream::{CardParts, MIN_UPDATE_INTERVAL_MS, Opening, StreamCard},
};
use crate::{
    agent::{HandoffAsk, Progress},
    config::Config,
    context::{collector::token_estimate, selector::truncate},
    feishu_api::{
        Urgency, fit,
        identity::Identities,
        outbound::{CardUpdate, Format, Outbound, OutboundError, PostedCard},
        reply::Sent,
    },
    store::{ReplyKind, StoreError, TurnCompletion, TurnState, TurnStore},
    util::UnixMs,
    vocab::{EventType, ItemType, NewContextEvent, NewItem, Role},
};

/// What the user is told about a turn a restart or shutdown interrupted.
pub(super) const INTERRUPTED: &str = "Sorry, the bridge restarted while the agent was working on \
     this, so it was not answered. Please send it again.";

/// Below this many bytes of room a final card shows no answer text, only that it
/// continues below.
const MIN_CARD_ROOM: usize = 1024;

/// Posts and records what a turn tells its user.
pub(super) struct Deliverer {
    config: Arc<Config>,
    store: Arc<dyn TurnStore>,
    identities: Arc<Identities>,
    outbound: Arc<dyn Outbound>,
    /// Cancelled when the bridge shuts down: writes stop being retried then.
    shutdown: CancellationToken,
    /// What answers hand to other profiles.
    handoffs: Handoffs,
}

impl Deliverer {
    /// A deliverer over the app's parts.
    pub(super) fn new(
        config: Arc<Config>,
        store: Arc<dyn TurnStore>,
        identities: Arc<Identities>,
        outbound: Arc<dyn Outbound>,
        shutdown: CancellationToken,
        handoffs: Handoffs,
    ) -> Self {
        Self {
            config,
            store,
            identities,
            outbound,
            shutdown,
            handoffs,
        }
    }

    /// The handoff `job`'s answer asks for (see [`Handoffs::plan`]).
    pub(super) async fn plan_handoff(
        &self,
        job: &TurnJob,
        answer: &str,
        ask: Option<&HandoffAsk>,
        requester: Option<&str>,
    ) -> Result<Option<Plan>, StoreError> {
        self.handoffs.plan(job, answer, ask, requester).await
    }

    /// Counts a queued handoff turn cancelled before it ran.
    pub(super) fn handoff_cancelled(&self) {
        self.handoffs.cancelled();
    }

    /// Records how a turn ended (retried while the database fails); `false` when it had
    /// already ended.
    pub(super) async fn end(
        &self,
        turn_id: &str,
        state: TurnState,
        error: &str,
    ) -> Result<bool, StoreError> {
        persist(&self.shutdown, "end", turn_id, || {
            self.store.end_turn(turn_id, state, error, UnixMs::now())
        })
        .await
    }

    /// Posts the turn's card (now, or with the first progress) and keeps it current
    /// from `progress`; the card finishes with no card posted (the answer then comes as
    /// a reply) when it cannot be posted.
    pub(super) async fn open_card(
        &self,
        job: &TurnJob,
        progress: &watch::Sender<Progress>,
        opening: Opening,
    ) -> StreamCard {
        let parts = CardParts {
            outbound: self.outbound.clone(),
            store: self.store.clone(),
            interval: self.card_interval(&job.profile),
        };
        StreamCard::open(parts, job, progress, opening).await
    }

    /// Fewest milliseconds between two updates of a card of `profile`.
    pub(super) fn card_interval(&self, profile: &str) -> Duration {
        Duration::from_millis(
            self.config
                .profile(profile)
                .map_or(MIN_UPDATE_INTERVAL_MS, |p| p.agent.stream_interval_ms)
                .max(MIN_UPDATE_INTERVAL_MS),
        )
    }

    /// Posts the answer and records it, with the handoff it asks for (`handoff`). `card`
    /// is the turn's streaming card, if any, with what the turn showed beside its text
    /// (kept in the final card). An answer without a card goes out as markdown, so its
    /// code blocks and tables render. The target's job when the handoff queued a turn.
    pub(super) async fn deliver(
        &self,
        job: &TurnJob,
        card: Option<(&PostedCard, &Progress)>,
        answer: &str,
        topic_root_delivered: Option<(String, String, String)>,
        handoff: Option<&Plan>,
    ) -> Result<Option<TurnJob>, TurnError> {
        let reply = match card {
            Some((card, shown)) => match persist(&self.shutdown, "final card", &job.turn_id, || {
                self.finish_card(job, card, shown, answer)
            })
            .await
            {
                Ok(()) => card.sent.clone(),
                Err(e) => {
                    tracing::warn!(turn_id = %job.turn_id, error = %e, "final card update failed; answering with a reply");
                    self.send_answer(job, answer, Format::Markdown).await?
                }
            },
            None => self.send_answer(job, answer, Format::Markdown).await?,
        };
        let now = UnixMs::now();
        let (write, next) = match handoff {
            Some(plan) => {
                let (write, next) = self.handoffs.write(job, plan, &reply.message_id, now);
                (Some(write), next)
            }
            None => (None, None),
        };
        let completion = TurnCompletion {
            turn_id: job.turn_id.clone(),
            output_event: self.output_event(job, &reply, answer),
            reply_message_id: reply.message_id.clone(),
            topic_root_delivered,
            handoff: write,
            now,
        };
        persist(&self.shutdown, "completion", &job.turn_id, || {
            self.store.complete_turn(&completion)
        })
        .await?;
        if let Some(plan) = handoff {
            self.handoffs.settle(job, plan, &reply.message_id).await;
        }
        Ok(match next {
            Some(next) if self.handoffs.queued(&next).await => Some(next),
            _ => None,
        })
    }

    /// Posts (or records) the answer; a reply the database failed to record is sent
    /// again with the same uuids once it is back, so Feishu posts it once.
    async fn send_answer(
        &self,
        job: &TurnJob,
        answer: &str,
        format: Format,
    ) -> Result<Sent, OutboundError> {
        persist(&self.shutdown, "reply", &job.turn_id, || {
            let reply = ReplyTo::of(job).reply_as(ReplyKind::Answer, answer.to_string(), format);
            self.outbound.send(reply)
        })
        .await
    }

    /// The card gets the first part of the answer that fits it (beside what else the
    /// turn showed), in its final state with its buttons; the rest follows in markdown
    /// continuations below it. An update refused for its size is made again with half as
    /// much text, so the card never stays "running" with a stop button.
    async fn finish_card(
        &self,
        job: &TurnJob,
        card: &PostedCard,
        shown: &Progress,
        answer: &str,
    ) -> Result<(), OutboundError> {
        let mut room = room_beside(shown, CardState::Continued, &job.turn_id);
        loop {
            let parts = if fit::card_text_bytes(answer) <= room {
                vec![answer.to_string()]
            } else if room >= MIN_CARD_ROOM {
                fit::split(answer, room, fit::card_text_bytes)
            } else {
                // Not even a little text fits: the card only points below.
                vec![String::new(), answer.to_string()]
            };
            let first = parts.first().map(String::as_str).unwrap_or_default();
            let state = if parts.len() > 1 {
                CardState::Continued
            } else {
                CardState::Done
            };
            let last = Progress {
                text: first.to_string(),
                ..shown.clone()
            };
            let view = progress_card(&last, state, &job.turn_id, None);
            let updated = self
                .outbound
                .update_card(CardUpdate {
                    profile: &job.profile,
                    chat_id: &job.chat_id,
                    card,
                    view: &view,
                    text: first,
                    urgency: Urgency::Required,
                    whole: true,
                })
                .await;
            match updated {
                Ok(()) => {
                    if parts.len() > 1 {
                        self.send_answer(job, &parts[1..].join("\n"), Format::Markdown)
                            .await?;
                    }
                    return Ok(());
                }
                Err(e) if e.too_large() && !first.is_empty() => {
                    tracing::warn!(turn_id = %job.turn_id, room, "the final card was refused for its size; sending it with less text");
                    room /= 2;
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// Tells the user something about a turn, as a reply to its request.
    pub(super) async fn notify(&self, to: ReplyTo<'_>, text: &str) -> Result<(), OutboundError> {
        let notice = to.reply(ReplyKind::Notice, text.to_string());
        self.outbound.send(notice).await.map(|_| ())
    }

    /// Tells the user a turn ended without an answer: on its card when it has one
    /// (`(card, what it showed)`; the card then shows `state` with as much of the text as
    /// fits — a failure to update it is only logged, the turn's state is already
    /// recorded), else with `notice`.
    pub(super) async fn tell_ended(
        &self,
        to: ReplyTo<'_>,
        card: Option<(&PostedCard, &Progress)>,
        state: CardState<'_>,
        notice: &str,
    ) -> Result<(), OutboundError> {
        let Some((card, progress)) = card else {
            return self.notify(to, notice).await;
        };
        let (text, _) = fitting_beside(progress, state, to.turn_id);
        let shown = Progress {
            text,
            ..progress.clone()
        };
        let view = progress_card(&shown, state, to.turn_id, None);
        if let Err(e) = self
            .outbound
            .update_card(CardUpdate {
                profile: to.profile,
                chat_id: to.chat_id,
                card,
                view: &view,
                text: &shown.text,
                urgency: Urgency::Required,
                whole: true,
            })
            .await
        {
            tracing::warn!(turn_id = %to.turn_id, error = %e, "card not updated");
        }
        Ok(())
    }

    /// The answer as this profile's `agent_output`, so the other bots in the thread see
    /// it next time (truncated over `max_agent_output_chars`, flagged). It was said when
    /// Feishu says its message was created — the time every other bot's record of the
    /// thread uses too — or, when the send answered no time, now.
    fn output_event(&self, job: &TurnJob, reply: &Sent, answer: &str) -> NewContextEvent {
        let (text, truncated) = truncate(answer, self.config.context.max_agent_output_chars);
        let actor = self
            .identities
            .get(&job.profile)
            .unwrap_or_else(|| job.app_id.clone());
        NewContextEvent {
            chat_id: job.chat_id.clone(),
            chat_type: job.chat_type,
            root_msg_id: job.root_msg_id.clone(),
            thread_id: job.thread_id.clone(),
            message_id: reply.message_id.clone(),
            event_type: EventType::AgentOutput,
            actor_type: "bot".into(),
            actor_id: actor,
            bridge_id: job.app_id.clone(),
            bot_profile: job.profile.clone(),
            target_id: None,
            target_name: None,
            session_name: Some(job.session_key.clone()),
            history_scope: job.history_scope.clone(),
            text: text.clone(),
            metadata_json: serde_json::json!({
                "truncated": truncated,
                "reply_to": job.message_id,
                "turn_id": job.turn_id,
            })
            .to_string(),
            created_at: reply.create_time.unwrap_or_else(UnixMs::now),
            item: (!job.is_dm).then(|| NewItem {
                item_type: ItemType::AgentOutput,
                role: Role::Bot,
                author_label: format!("{} (agent)", job.profile),
                token_estimate: token_estimate(&text),
                text,
                truncated,
            }),
        }
    }
}
