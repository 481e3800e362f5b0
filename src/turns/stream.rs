//! A streaming answer's card: posted when the turn starts (with a stop button), updated
//! as the agent's text grows — at most one update per interval, each with the whole
//! text so far, in order — and handed back for its final state when the agent is done.

use std::{sync::Arc, time::Duration};

use tokio::{sync::watch, task::JoinHandle};
use tokio_util::sync::CancellationToken;

use super::{
    card::{CARD_TEXT_MAX, CardState, answer_card},
    job::{ReplyTo, TurnJob},
};
use crate::feishu_api::{
    outbound::{CardReply, CardUpdate, Outbound},
    reply::Sent,
};

/// Fewest milliseconds between two updates of one card. Feishu allows 5 updates per
/// second per message; this stays well below, leaving room for the final update.
pub const MIN_UPDATE_INTERVAL_MS: u64 = 200;

/// A posted card and the task keeping it current.
pub(super) struct StreamCard {
    /// The card's message (its create time is where the answer sits in the thread).
    posted: Sent,
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
            Ok(sent) => sent,
            Err(e) => {
                tracing::warn!(turn_id = %job.turn_id, error = %e, "streaming card not posted; the answer will come as text");
                return None;
            }
        };
        let stop = CancellationToken::new();
        let task = tokio::spawn(keep_current(
            outbound.clone(),
            job.clone(),
            posted.message_id.clone(),
            partial.subscribe(),
            interval,
            stop.clone(),
        ));
        Some(Self { posted, stop, task })
    }

    /// The card's message id.
    pub(super) fn message_id(&self) -> &str {
        &self.posted.message_id
    }

    /// Stops the updates (after the one in flight) and returns the card's message.
    pub(super) async fn finish(self) -> Sent {
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
    message_id: String,
    mut text: watch::Receiver<String>,
    interval: Duration,
    stop: CancellationToken,
) {
    loop {
        tokio::select! {
            biased;
            () = stop.cancelled() => return,
            changed = text.changed() => if changed.is_err() { return },
        }
        let now = text.borrow_and_update().clone();
        let shown: String = now.chars().take(CARD_TEXT_MAX).collect();
        let card = answer_card(&shown, CardState::Running, &job.turn_id);
        if let Err(e) = outbound
            .update_card(CardUpdate {
                profile: &job.profile,
                chat_id: &job.chat_id,
                message_id: &message_id,
                card: &card,
                text: &shown,
            })
            .await
        {
            tracing::warn!(turn_id = %job.turn_id, error = %e, "card update failed");
        }
        tokio::select! {
            () = stop.cancelled() => return,
            () = tokio::time::sleep(interval) => {}
        }
    }
}
