//! A streaming turn's card: posted when the turn starts (a streaming backend) or with
//! the first thing the agent shows (an agent reporting turn events), with a stop button;
//! updated as what the turn shows grows — at most one update per interval, each with
//! the whole of it that fits the card — and handed back for its final state when the
//! agent is done. An intermediate update that finds no room (the app's call budget, the
//! card's pace, a rate limit) or a card in a user's interaction is simply skipped: the
//! next one carries everything. A card whose only change is more answer text streams it
//! into its answer element (CardKit); any other change (a tool call, a question, the
//! status line) replaces the card whole. While the card shows a status line, its
//! elapsed time is brought up to date every [`ELAPSED_REFRESH`] even without news.

use std::{sync::Arc, time::Duration};

use tokio::{sync::watch, task::JoinHandle, time::Instant};
use tokio_util::sync::CancellationToken;

use super::{
    card::{CardState, fitting_beside, progress_card},
    job::{ReplyTo, TurnJob},
};
use crate::{
    agent::Progress,
    feishu_api::{
        OpenApiError, Urgency,
        outbound::{CardReply, CardUpdate, Outbound, OutboundError, PostedCard},
    },
    store::TurnStore,
};

/// Fewest milliseconds between two updates of one card. Feishu allows 5 updates per
/// second per message (10 per CardKit card); this stays below, leaving room for the
/// final update.
pub const MIN_UPDATE_INTERVAL_MS: u64 = 200;

/// How often a card showing a status line has its elapsed time refreshed when nothing
/// else changes.
const ELAPSED_REFRESH: Duration = Duration::from_secs(10);

/// When a card is posted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Opening {
    /// At once (a streaming backend).
    Now,
    /// With the first thing the turn shows; never, if it shows nothing before its answer.
    FirstShown,
}

/// What a card is posted and kept current with.
pub(super) struct CardParts {
    pub outbound: Arc<dyn Outbound>,
    /// Where the posted card is recorded on its turn.
    pub store: Arc<dyn TurnStore>,
    pub interval: Duration,
}

/// A turn's card (once posted) and the task keeping it current.
pub(super) struct StreamCard {
    stop: CancellationToken,
    task: JoinHandle<Option<PostedCard>>,
}

impl StreamCard {
    /// Posts `job`'s card (a stop button, no text yet) now — before this returns — or
    /// with the first progress, and keeps it current from `progress`, at most once per
    /// interval. No card is posted when posting fails (the answer then comes as a
    /// reply).
    pub(super) async fn open(
        parts: CardParts,
        job: &TurnJob,
        progress: &watch::Sender<Progress>,
        opening: Opening,
    ) -> Self {
        let stop = CancellationToken::new();
        let posted = match opening {
            Opening::Now => Some(post(&parts, job).await),
            Opening::FirstShown => None,
        };
        let task = tokio::spawn(run(
            parts,
            job.clone(),
            progress.subscribe(),
            posted,
            stop.clone(),
        ));
        Self { stop, task }
    }

    /// Stops the updates and returns the card, if one was posted. A card being posted
    /// is waited for; an update in flight to a CardKit card is dropped (its sequence is
    /// below the final one's, so it can never land after it); one to a message's card,
    /// which has no sequence, is waited for.
    pub(super) async fn finish(self) -> Option<PostedCard> {
        self.stop.cancel();
        match self.task.await {
            Ok(card) => card,
            Err(e) => {
                // The updater only logs; a panic in it leaves the answer to a reply.
                tracing::warn!(error = %e, "card updater ended abnormally");
                None
            }
        }
    }
}

/// Posts the card when it is due (unless it was `posted` already) and keeps it current
/// until stopped.
async fn run(
    parts: CardParts,
    job: TurnJob,
    mut progress: watch::Receiver<Progress>,
    posted: Option<Option<PostedCard>>,
    stop: CancellationToken,
) -> Option<PostedCard> {
    let started = Instant::now();
    let card = match posted {
        Some(card) => card?,
        None => {
            loop {
                tokio::select! {
                    biased;
                    () = stop.cancelled() => return None,
                    changed = progress.changed() => if changed.is_err() { return None },
                }
                if !progress.borrow().is_empty() {
                    break;
                }
            }
            post(&parts, &job).await?
        }
    };
    keep_current(&parts, &job, &card, progress, started, &stop).await;
    Some(card)
}

/// Posts the card and records it on its turn; `None` when it cannot be posted.
async fn post(parts: &CardParts, job: &TurnJob) -> Option<PostedCard> {
    let posted = parts
        .outbound
        .send_card(CardReply {
            profile: job.profile.clone(),
            chat_id: job.chat_id.clone(),
            reply_to: Some(job.message_id.clone()),
            in_thread: ReplyTo::of(job).in_thread,
            turn_id: job.turn_id.clone(),
            card: progress_card(&Progress::default(), CardState::Running, &job.turn_id, None),
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
    if let Err(e) = parts
        .store
        .set_turn_card(&job.turn_id, posted.message_id(), posted.card_id())
        .await
    {
        tracing::warn!(turn_id = %job.turn_id, error = %e, "card id not recorded");
    }
    Some(posted)
}

async fn keep_current(
    parts: &CardParts,
    job: &TurnJob,
    card: &PostedCard,
    mut progress: watch::Receiver<Progress>,
    started: Instant,
    stop: &CancellationToken,
) {
    // What the card shows beside its text, as last updated.
    let mut shown_beside = Progress::default();
    // Whether the latest progress has not been shown (its update was deferred).
    let mut behind = !progress.borrow().is_empty();
    loop {
        if !behind {
            let refresh = shown_beside.is_rich();
            tokio::select! {
                biased;
                () = stop.cancelled() => return,
                changed = progress.changed() => if changed.is_err() { return },
                () = tokio::time::sleep(ELAPSED_REFRESH), if refresh => {}
            }
        }
        let now = progress.borrow_and_update().clone();
        let (text, _) = fitting_beside(&now, CardState::Running, &job.turn_id);
        let shown = Progress { text, ..now };
        let view = progress_card(
            &shown,
            CardState::Running,
            &job.turn_id,
            Some(started.elapsed()),
        );
        let beside = Progress {
            text: String::new(),
            ..shown.clone()
        };
        let whole = beside != shown_beside || beside.is_rich();
        let update = parts.outbound.update_card(CardUpdate {
            profile: &job.profile,
            chat_id: &job.chat_id,
            card,
            view: &view,
            text: &shown.text,
            urgency: Urgency::Intermediate,
            whole,
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
            Ok(()) => {
                shown_beside = beside;
                false
            }
            Err(OutboundError::Api(OpenApiError::Deferred | OpenApiError::RateLimited { .. })) => {
                true
            }
            // A press on the card is being answered: this goes with the next try.
            Err(e) if e.card_in_interaction() => true,
            Err(e) => {
                tracing::debug!(turn_id = %job.turn_id, error = %e, "intermediate card update not made");
                false
            }
        };
        tokio::select! {
            () = stop.cancelled() => return,
            () = tokio::time::sleep(parts.interval) => {}
        }
    }
}
