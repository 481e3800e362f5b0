//! Asks answered from the card: the `answer` button a card draws for each choice of an
//! open ask, and the duty that times asks out. An answer is stored once (the first
//! press wins), announced on the app's turn-event channel so the card redraws, and
//! delivered to the agent ([`AnswerSender`]). Who may press is the buttons' rule (see
//! [`super::buttons`]): whoever may invoke the turn's session.

use std::{sync::Arc, time::Duration};

use serde_json::{Value, json};
use tokio::sync::broadcast;
use tokio_util::{sync::CancellationToken, task::TaskTracker};

use crate::{
    agent::{answer::AnswerSender, events::TurnEventNote},
    store::{AnswerOutcome, AskRow, AskStore, TurnRow},
    util::{Clock, UnixMs},
};

/// The `action` of an answer button; its value also names `ask_id` and `value`.
pub const ACTION_ANSWER: &str = "answer";

/// How often asks past their deadline are looked for.
pub const TIMEOUT_PERIOD: Duration = Duration::from_secs(1);

/// How long a press's answer waits for the answer to be stored.
const ANSWER_WITHIN: Duration = Duration::from_millis(1000);

/// What answering a press needs (the buttons' context lends it).
pub(super) struct Answering<'a> {
    pub store: Arc<dyn AskStore>,
    pub notes: broadcast::Sender<TurnEventNote>,
    pub answers: Arc<AnswerSender>,
    /// Where the write runs (the shutdown waits for it).
    pub background: &'a TaskTracker,
}

/// A toast answer.
fn toast(kind: &str, content: &str) -> Value {
    json!({"toast": {"type": kind, "content": content}})
}

/// Answers an `answer` press of `presser` (an open_id) on `turn`'s card, whose value is
/// `value`; the press is already known to be allowed.
pub(super) async fn answer(
    cx: Answering<'_>,
    turn: &TurnRow,
    value: &Value,
    presser: Option<&str>,
) -> Value {
    let field = |name: &str| value.get(name).and_then(Value::as_str).map(str::to_string);
    let (Some(ask_id), Some(choice)) = (field("ask_id"), field("value")) else {
        return toast("error", "This button does not answer a question I know.");
    };
    let Some(by) = presser.map(str::to_string) else {
        return toast("error", "You cannot do that for this conversation.");
    };
    let Answering {
        store,
        notes,
        answers,
        background,
    } = cx;
    let turn_id = turn.turn_id.clone();
    let by_in = by.clone();
    // In a task of its own: a slow database delays the answer, never Feishu's toast.
    let stored = background.spawn(async move {
        let outcome = store
            .answer_ask(&turn_id, &ask_id, &choice, &by_in, UnixMs::now())
            .await;
        match &outcome {
            Ok(AnswerOutcome::Answered(row)) => settled(&notes, &answers, row),
            Ok(_) => {}
            Err(e) => {
                tracing::warn!(turn_id = %turn_id, reason = %e.reason(), "an ask's answer was not stored")
            }
        }
        outcome
    });
    match tokio::time::timeout(ANSWER_WITHIN, stored).await {
        Ok(Ok(Ok(outcome))) => toast_of(&outcome, &by),
        Ok(_) => toast("error", "The answer could not be recorded; try again."),
        Err(_) => toast("info", "Recording your answer…"),
    }
}

/// What the presser is told.
fn toast_of(outcome: &AnswerOutcome, presser: &str) -> Value {
    match outcome {
        AnswerOutcome::Answered(row) => toast(
            "success",
            &format!(
                "Answer recorded: {}",
                row.answer.as_deref().unwrap_or_default()
            ),
        ),
        AnswerOutcome::AlreadyAnswered(row) if !row.timed_out => {
            let who = match row.answered_by.as_deref() {
                Some(by) if by == presser => "you",
                Some(by) => by,
                None => "someone",
            };
            let value = row.answer.as_deref().unwrap_or_default();
            toast("info", &format!("Already answered: {value} by {who}"))
        }
        AnswerOutcome::AlreadyAnswered(_) | AnswerOutcome::TurnEnded => {
            toast("info", "This question is closed.")
        }
        AnswerOutcome::Unknown => toast("error", "This button does not answer a question I know."),
        AnswerOutcome::BadValue => toast("error", "That is not one of this question's answers."),
    }
}

/// An ask just answered (or timed out): the card is told, and the agent will be.
fn settled(notes: &broadcast::Sender<TurnEventNote>, answers: &Arc<AnswerSender>, row: &AskRow) {
    // Nobody listening is fine: the card also reads the store.
    let _ = notes.send(TurnEventNote {
        turn_id: row.turn_id.clone(),
        seq: 0,
        stale: false,
    });
    answers.start(&row.turn_id, &row.ask_id);
}

/// Times out the asks past their deadline, once a [`TIMEOUT_PERIOD`], and takes up
/// answers whose delivery a stopped replica left.
pub struct AskDuty {
    pub store: Arc<dyn AskStore>,
    pub answers: Arc<AnswerSender>,
    pub notes: broadcast::Sender<TurnEventNote>,
    pub clock: Arc<dyn Clock>,
}

impl AskDuty {
    /// Runs until `stop`.
    pub async fn run(self, stop: CancellationToken) {
        let mut tick = tokio::time::interval(TIMEOUT_PERIOD);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = tick.tick() => self.once().await,
                () = stop.cancelled() => break,
            }
        }
    }

    /// One round: timeouts, then leftover deliveries.
    pub async fn once(&self) {
        match self.store.time_out_asks(self.clock.now()).await {
            Ok(rows) => {
                for row in &rows {
                    tracing::info!(turn_id = %row.turn_id, answered = row.answer.is_some(), "an ask timed out");
                    settled(&self.notes, &self.answers, row);
                }
            }
            Err(e) => {
                tracing::debug!(reason = %e.reason(), "asks past their deadline not looked at")
            }
        }
        self.answers.sweep().await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(answered_by: Option<&str>, timed_out: bool) -> AskRow {
        AskRow {
            turn_id: "turn_1".into(),
            ask_id: "q".into(),
            prompt: "p".into(),
            style: "confirm".into(),
            options: Vec::new(),
            default_value: None,
            asked_at: UnixMs(1),
            deadline: UnixMs(2),
            answer: Some("yes".into()),
            answered_by: answered_by.map(str::to_string),
            answered_at: Some(UnixMs(2)),
            timed_out,
            delivered_at: None,
        }
    }

    #[test]
    fn the_toasts_say_what_became_of_the_press() {
        let content = |o: &AnswerOutcome| toast_of(o, "ou_a")["toast"]["content"].clone();
        let answered = AnswerOutcome::Answered(row(Some("ou_a"), false));
        assert_eq!(content(&answered), "Answer recorded: yes");
        let by_other = AnswerOutcome::AlreadyAnswered(row(Some("ou_b"), false));
        assert_eq!(content(&by_other), "Already answered: yes by ou_b");
        let by_me = AnswerOutcome::AlreadyAnswered(row(Some("ou_a"), false));
        assert_eq!(content(&by_me), "Already answered: yes by you");
        let timed_out = AnswerOutcome::AlreadyAnswered(row(None, true));
        assert_eq!(content(&timed_out), "This question is closed.");
        assert_eq!(
            content(&AnswerOutcome::TurnEnded),
            "This question is closed."
        );
    }
}
