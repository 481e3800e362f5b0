//! After a restart: turns the previous run left unfinished are picked up, never silently
//! dropped. Queued turns are queued again (in their order); a turn whose answer was
//! stored before the crash has it delivered (with the same uuids, so Feishu posts it
//! once even if the first attempt got through); a turn that was still waiting for its
//! agent is failed and its user told.

use std::sync::Arc;

use super::{
    card::CardState,
    deliver::INTERRUPTED,
    job::{Outcome, ReplyTo, TurnJob},
    queue::SessionQueues,
    runner::TurnRunner,
};
use crate::{
    feishu_api::{outbound::PostedCard, reply::Sent},
    store::{StoreError, TurnRow, TurnState},
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

/// Picks up the turns an earlier run left unfinished, through the runner that runs new
/// ones.
#[derive(Debug, Clone)]
pub struct Recovery {
    runner: Arc<TurnRunner>,
}

impl Recovery {
    /// Recovery through `runner`.
    pub fn new(runner: Arc<TurnRunner>) -> Self {
        Self { runner }
    }

    /// Picks up every unfinished turn, through the session queues so that each session
    /// keeps its order.
    pub async fn run(&self, queues: &SessionQueues) -> Result<Recovered, StoreError> {
        let mut found = Recovered::default();
        for row in self.runner.store().unfinished_turns().await? {
            let state = row.state;
            let job = serde_json::from_str::<TurnJob>(&row.job_json).ok();
            let (key, label) = (row.session_key.clone(), row.turn_id.clone());
            let this = self.clone();
            match (state, job) {
                (TurnState::Queued, Some(job)) => {
                    found.requeued += 1;
                    self.runner.submit(queues, job);
                }
                (TurnState::Running, Some(job)) if row.output.is_some() => {
                    found.delivering += 1;
                    queues.submit(
                        &key,
                        &label,
                        Box::new(move |_| Box::pin(async move { this.resume(row, job).await })),
                    );
                }
                (_, job) => {
                    found.interrupted += 1;
                    queues.submit(
                        &key,
                        &label,
                        Box::new(move |_| {
                            Box::pin(async move { this.interrupted(row, job).await })
                        }),
                    );
                }
            }
        }
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

    /// Delivers an answer stored before the restart.
    async fn resume(&self, row: TurnRow, job: TurnJob) {
        let output = row.output.clone().unwrap_or_default();
        let deliverer = self.runner.deliverer();
        // The card's create time was not kept: the answer is stamped when delivered.
        let card = posted_card(&row);
        let outcome = match deliverer.deliver(&job, card.as_ref(), &output, None).await {
            Ok(()) => Outcome::Delivered,
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
        self.runner
            .announce(&row.profile, &row.message_id, &row.turn_id, outcome);
    }

    /// Fails a turn the restart interrupted and tells its user.
    async fn interrupted(&self, row: TurnRow, job: Option<TurnJob>) {
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
                let card = posted.as_ref().map(|p| (p, ""));
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
