//! A streaming answer's card: posted when the turn starts (with a stop button), updated
//! as the agent's text grows — at most one update per interval, each with the whole
//! text so far that fits the card — and handed back for its final state when the agent
//! is done. An intermediate update that finds no room (the app's call budget, the
//! card's pace, a rate limit) or a card in a user's interaction is simply skipped: the
//! next one carries everything.

use std::{sync::Arc, time::Duration};

use tokio::{sync::watch, task::JoinHandle};
use tokio_util::sync::CancellationToken;

use super::{
    card::{CardState, answer_card, fitting},
    job::{ReplyTo, TurnJob},
};
use crate::feishu_api::{
    OpenApiError, Urgency,
    outbound::{CardReply, CardUpdate, Outbound, OutboundError, PostedCard},
};

/// Fewest milliseconds between two updates of one card. Feishu allows 5 updates per
/// second per message (10 per CardKit card); this stays below, leaving room for the
/// final update.
pub const MIN_UPDATE_INTERVAL_MS: u64 = 200;

/// A posted card and the task keeping it current.
pub(super) struct StreamCard {
    posted: PostedCard,
    stop: CancellationToken,
    task: JoinHandle<()>,
}

impl StreamCard {
    /// Posts `job`'s card (a stop button, no text yet) and starts updating it from
    /// `partial`, at most once per `interval`; `None` when the card cannot be posted.
    pub(super) async fn open(
        outbound: &Arc<dyn Outbound>,
        job: &TurnJob,
        partial: &watch::Sender<String>,
        interval: Duration,
    ) -> Option<Self> {
        let posted = outbound
            .send_card(CardReply {
                profile: job.profile.clone(),
                chat_id: job.chat_id.clone(),
                reply_to: Some(job.message_id.clone()),
                in_thread: ReplyTo::of(job).in_thread,
                turn_id: job.turn_id.clone(),
                card: answer_card("", CardState::Running, &job.turn_id),
                text: String::new(),
            })
            .await;
        let posted = match posted {
            Ok(posted) => posted,
            Err(e) => {
                tracing::warn!(turn_id = %job.turn_id, error = %e, "streaming card not posted; the answer will come as text");
                return None;
            }
        };
        let stop = CancellationToken::new();
        let task = tokio::spawn(keep_current(
            outbound.clone(),
            job.clone(),
            posted.clone(),
            partial.subscribe(),
            interval,
            stop.clone(),
        ));
        Some(Self { posted, stop, task })
    }

    /// The posted card.
    pub(super) fn posted(&self) -> &PostedCard {
        &self.posted
    }

    /// Stops the updates and returns the card. An update in flight to a CardKit card is
    /// dropped (its sequence is below the final one's, so it can never land after it);
    /// one to a message's card, which has no sequence, is waited for.
    pub(super) async fn finish(self) -> PostedCard {
        self.stop.cancel();
        if let Err(e) = self.task.await {
            // The updater only logs; a panic in it leaves the final update to the caller.
            tracing::warn!(error = %e, "card updater ended abnormally");
        }
        self.posted
    }
}

async fn keep_current(
    outbound: Arc<dyn Outbound>,
    job: TurnJob,
    card: PostedCard,
    mut text: watch::Receiver<String>,
    interval: Duration,
    stop: CancellationToken,
) {
    // Whether the latest text has not been shown (its update was deferred).
    let mut behind = false;
    loop {
        if !behind {
            tokio::select! {
                biased;
                () = stop.cancelled() => return,
                changed = text.changed() => if changed.is_err() { return },
            }
        }
        let now = text.borrow_and_update().clone();
        let (shown, _) = fitting(&now, CardState::Running, &job.turn_id);
        let view = answer_card(&shown, CardState::Running, &job.turn_id);
        let update = outbound.update_card(CardUpdate {
            profile: &job.profile,
            chat_id: &job.chat_id,
            card: &card,
            view: &view,
            text: &shown,
            urgency: Urgency::Intermediate,
        });
        let done = if card.card_id().is_some() {
            tokio::select! {
                () = stop.cancelled() => return,
                done = update => done,
            }
        } else {
            update.await
        };
        behind = match done {
            Ok(()) => false,
            Err(OutboundError::Api(OpenApiError::Deferred | OpenApiError::RateLimited { .. })) => {
                true
            }
            // A press on the card is being answered: this text goes with the next try.
            Err(e) if e.card_in_interaction() => true,
            Err(e) => {
                tracing::debug!(turn_id = %job.turn_id, error = %e, "intermediate card update not made");
                false
            }
        };
        tokio::select! {
            () = stop.cancelled() => return,
            () = tokio::time::sleep(interval) => {}
        }
    }
}
