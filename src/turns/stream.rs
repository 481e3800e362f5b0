//! A streaming answer's card: posted when the turn starts (with a stop button), updated
//! as the agent's text grows — at most one update per interval, each with the whole
//! text so far, in order — and handed back for its final state when the agent is done.

use std::time::Duration;

use tokio::{sync::watch, task::JoinHandle};
use tokio_util::sync::CancellationToken;

use super::{
    card::{CARD_TEXT_MAX, CardState, answer_card},
    deliver::ReplyTo,
    job::TurnJob,
    runner::TurnRunner,
};
use crate::feishu_api::outbound::CardReply;

/// Fewest milliseconds between two updates of one card. Feishu allows 5 updates per
/// second per message; this stays well below, leaving room for the final update.
pub const MIN_UPDATE_INTERVAL_MS: u64 = 200;

/// A posted card and the task keeping it current.
pub(super) struct StreamCard {
    message_id: String,
    stop: CancellationToken,
    task: JoinHandle<()>,
}

impl StreamCard {
    /// Stops the updates (after the one in flight) and returns the card's message id.
    pub(super) async fn finish(self) -> String {
        self.stop.cancel();
        let _ = self.task.await;
        self.message_id
    }
}

impl TurnRunner {
    /// Posts the turn's card and starts updating it from `partial`; `None` (answer as
    /// text instead) when the card cannot be posted.
    pub(super) async fn open_card(
        &self,
        job: &TurnJob,
        partial: &watch::Sender<String>,
    ) -> Option<StreamCard> {
        let posted = self
            .outbound
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
        let message_id = match posted {
            Ok(id) => id,
            Err(e) => {
                tracing::warn!(turn_id = %job.turn_id, error = %e, "streaming card not posted; the answer will come as text");
                return None;
            }
        };
        if let Err(e) = self.store.set_turn_card(&job.turn_id, &message_id).await {
            tracing::warn!(turn_id = %job.turn_id, error = %e, "card id not recorded");
        }
        let interval = Duration::from_millis(
            self.config
                .profile(&job.profile)
                .map_or(MIN_UPDATE_INTERVAL_MS, |p| p.agent.stream_interval_ms)
                .max(MIN_UPDATE_INTERVAL_MS),
        );
        let stop = CancellationToken::new();
        let task = tokio::spawn(keep_current(
            self.outbound.clone(),
            job.clone(),
            message_id.clone(),
            partial.subscribe(),
            interval,
            stop.clone(),
        ));
        Some(StreamCard {
            message_id,
            stop,
            task,
        })
    }
}

async fn keep_current(
    outbound: std::sync::Arc<dyn crate::feishu_api::outbound::Outbound>,
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
            .update_card(&job.profile, &job.chat_id, &message_id, &card, &shown)
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
