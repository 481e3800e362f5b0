//! After a restart, and while running for replicas that stopped: unfinished turns are
//! picked up, never silently dropped; each by exactly one replica (its owner, or the one
//! whose takeover of a dead replica's turn went through first). Queued turns are queued again (in their order); a turn whose answer was
//! stored before the crash has it delivered (with the same uuids, so Feishu posts it
//! once even if the first attempt got through); a turn that was still waiting for its
//! agent is failed and its user told. The reaction such a turn's request still shows is
//! taken off (and, at start, those of turns that ended before their removal got through).

use std::{sync::Arc, time::Duration};

use super::{
    card::CardState,
    deliver::INTERRUPTED,
    job::{Outcome, ReplyTo, TurnJob},
    queue::SessionQueues,
    runner::TurnRunner,
};
use crate::{
    feishu_api::{outbound::PostedCard, reply::Sent},
    store::{StoreError, TurnLeases, TurnRow, TurnState},
    util::UnixMs,
};

/// What recovery found.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Recovered {
    /// Queued turns queued again.
    pub requeued: usize,
    /// Stored answers to deliver.
    pub delivering: usize,
    /// Interrupted turns failed (their users told).
    pub interrupted: usize,
}

impl Recovered {
    fn count(&mut self, how: How) {
        match how {
            How::Requeue => self.requeued += 1,
            How::Deliver => self.delivering += 1,
            How::Interrupt => self.interrupted += 1,
        }
    }
}

/// What becomes of one unfinished turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum How {
    Requeue,
    Deliver,
    Interrupt,
}

/// The session queue of the turns taken over from another replica while this one runs:
/// beside the session's own queue, whose next turn may be waiting for exactly these
/// (the database keeps the order between the two).
fn taken_over_key(session_key: &str) -> String {
    format!("{session_key}\u{1f}taken-over")
}

/// Picks up the turns an earlier run left unfinished, through the runner that runs new
/// ones; and, while this replica runs, the turns of replicas that stopped renewing their
/// heartbeat.
#[derive(Debug, Clone)]
pub struct Recovery {
    runner: Arc<TurnRunner>,
    /// A replica whose heartbeat is older than this is taken for dead.
    lease: Duration,
}

impl Recovery {
    /// Recovery through `runner`; replicas silent for `lease` are taken for dead.
    pub fn new(runner: Arc<TurnRunner>, lease: Duration) -> Self {
        Self { runner, lease }
    }

    /// How long a replica may be silent before it is taken for dead.
    pub(super) fn lease(&self) -> Duration {
        self.lease
    }

    /// The runner its turns go through.
    pub(super) fn runner(&self) -> &Arc<TurnRunner> {
        &self.runner
    }

    fn leases(&self) -> &dyn TurnLeases {
        self.runner.leases().as_ref()
    }

    /// At start: picks up this replica's unfinished turns and those of dead replicas,
    /// through the session queues so that each session keeps its order.
    pub async fn run(&self, queues: &SessionQueues) -> Result<Recovered, StoreError> {
        let found = self.pick_up(queues, true).await?;
        // Ended turns whose reaction is still showing (its removal did not get through).
        self.runner.working().sweep().await;
        if found != Recovered::default() {
            tracing::info!(
                requeued = found.requeued,
                delivering = found.delivering,
                interrupted = found.interrupted,
                "unfinished turns of the previous run picked up"
            );
        }
        Ok(found)
    }

    /// While running: takes over the turns of replicas that stopped renewing their
    /// heartbeat, and this replica's own turns that nothing here holds any more (a turn
    /// whose end could not be written), once they are older than the lease.
    pub async fn sweep(&self, queues: &SessionQueues) -> Result<Recovered, StoreError> {
        let found = self.pick_up(queues, false).await?;
        if found != Recovered::default() {
            tracing::warn!(
                requeued = found.requeued,
                delivering = found.delivering,
                interrupted = found.interrupted,
                "unfinished turns of a replica that stopped taken over"
            );
        }
        Ok(found)
    }

    async fn pick_up(
        &self,
        queues: &SessionQueues,
        at_start: bool,
    ) -> Result<Recovered, StoreError> {
        let me = self.runner.owner().to_string();
        let now = UnixMs::now();
        let alive_since = crate::store::alive_since(now, self.lease);
        let mut found = Recovered::default();
        for row in self.leases().claimable_turns(&me, alive_since).await? {
            let mine = row.lease_owner.as_deref() == Some(me.as_str());
            if mine && !at_start && (queues.holds(&row.turn_id) || row.queued_at > alive_since) {
                // In hand here, or too new to be lost.
                continue;
            }
            if !mine
                && !self
                    .leases()
                    .take_turn(&row.turn_id, row.lease_owner.as_deref(), &me)
                    .await?
            {
                // Another replica took it first, or it ended.
                continue;
            }
            let key = if at_start {
                row.session_key.clone()
            } else {
                taken_over_key(&row.session_key)
            };
            found.count(self.dispatch(queues, &key, row));
        }
        Ok(found)
    }

    /// Queues what becomes of one unfinished turn under the session queue `key`.
    fn dispatch(&self, queues: &SessionQueues, key: &str, row: TurnRow) -> How {
        let job = serde_json::from_str::<TurnJob>(&row.job_json).ok();
        let label = row.turn_id.clone();
        let this = self.clone();
        match (row.state, job) {
            (TurnState::Queued, Some(job)) => {
                self.runner.submit_under(queues, key, job);
                How::Requeue
            }
            (TurnState::Running, Some(job)) if row.output.is_some() => {
                queues.submit(
                    key,
                    &label,
                    Box::new(move |_| Box::pin(async move { this.resume(row, job).await })),
                );
                How::Deliver
            }
            (_, job) => {
                queues.submit(
                    key,
                    &label,
                    Box::new(move |_| Box::pin(async move { this.interrupted(row, job).await })),
                );
                How::Interrupt
            }
        }
    }

    /// Delivers an answer stored before the restart.
    async fn resume(&self, row: TurnRow, job: TurnJob) {
        let output = row.output.clone().unwrap_or_default();
        let deliverer = self.runner.deliverer();
        // The card's create time was not kept: the answer is stamped when delivered.
        let card = posted_card(&row);
        let shown = self.runner.shown(&row.profile, &row.turn_id).await;
        let card = card.as_ref().map(|c| (c, &shown));
        let ask = row
            .handoff_json
            .as_deref()
            .and_then(|j| serde_json::from_str(j).ok());
        let delivered = match deliverer
            .plan_handoff(&job, &output, ask.as_ref(), None)
            .await
        {
            Ok(plan) => {
                deliverer
                    .deliver(&job, card, &output, None, plan.as_ref())
                    .await
            }
            Err(e) => Err(e.into()),
        };
        let outcome = match delivered {
            Ok(next) => {
                if let Some(next) = next {
                    self.runner.hand_over(next);
                }
                Outcome::Delivered
            }
            Err(e) => {
                tracing::error!(turn_id = %row.turn_id, error = %e, "stored answer not delivered");
                if let Err(e) = deliverer
                    .end(&row.turn_id, TurnState::Failed, &e.to_string())
                    .await
                {
                    tracing::error!(turn_id = %row.turn_id, error = %e, "undelivered turn not recorded");
                }
                Outcome::Failed
            }
        };
        self.runner.working().remove_recorded(&row);
        self.runner
            .announce(&row.profile, &row.message_id, &row.turn_id, outcome);
    }

    /// Fails a turn the restart interrupted and tells its user.
    async fn interrupted(&self, row: TurnRow, job: Option<TurnJob>) {
        // Nobody works on it any more, whoever ends it.
        self.runner.working().remove_recorded(&row);
        let deliverer = self.runner.deliverer();
        let ended = deliverer
            .end(
                &row.turn_id,
                TurnState::Failed,
                "interrupted: the bridge restarted",
            )
            .await;
        match ended {
            Ok(true) => {
                let to = ReplyTo {
                    profile: &row.profile,
                    chat_id: &row.chat_id,
                    message_id: &row.message_id,
                    turn_id: &row.turn_id,
                    in_thread: job.as_ref().is_none_or(|j| !j.is_dm),
                };
                let posted = posted_card(&row);
                let progress = self.runner.shown(&row.profile, &row.turn_id).await;
                let card = posted.as_ref().map(|p| (p, &progress));
                let shown = CardState::Failed(INTERRUPTED);
                if let Err(e) = deliverer.tell_ended(to, card, shown, INTERRUPTED).await {
                    tracing::warn!(turn_id = %row.turn_id, error = %e, "interrupted turn's user not told");
                }
                self.runner.announce(
                    &row.profile,
                    &row.message_id,
                    &row.turn_id,
                    Outcome::Interrupted,
                );
            }
            // Someone else ended it meanwhile (a stop): nothing to tell.
            Ok(false) => {}
            Err(e) => {
                tracing::error!(turn_id = %row.turn_id, error = %e, "interrupted turn not recorded")
            }
        }
    }
}

/// The card a turn of the previous run posted, as this run can update it: a CardKit
/// entity's operations count their sequence from the turn's start (before the card was
/// created), so they come after every one the previous run sent.
fn posted_card(row: &TurnRow) -> Option<PostedCard> {
    let sent = Sent::unstamped(row.card_message_id.clone()?);
    Some(match (&row.card_id, row.started_at) {
        (Some(card_id), Some(started)) => PostedCard::entity(sent, card_id.clone(), started),
        _ => PostedCard::message(sent),
    })
}
