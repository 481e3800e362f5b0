//! The questions webhook agents ask during a turn (`ask` turn events): one row per
//! (turn, ask id), created with its event, answered once — by a card button or by its
//! timeout — and the answer delivered to the agent once (see `docs/turns.md`, "Asking
//! the user").

use async_trait::async_trait;

use super::StoreError;
use crate::util::UnixMs;

/// An ask to create with its `ask` event (in the event's transaction).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewAsk<'a> {
    pub ask_id: &'a str,
    pub prompt: &'a str,
    /// `confirm` or `select`.
    pub style: &'a str,
    /// The choices (none for a plain yes/no confirm).
    pub options: &'a [String],
    /// What a timeout answers (`None`: a timeout answers nothing).
    pub default_value: Option<&'a str>,
    /// How long it stays open.
    pub timeout_secs: u64,
}

impl NewAsk<'_> {
    /// Its options as stored.
    pub fn options_json(&self) -> String {
        serde_json::to_string(self.options).unwrap_or_else(|_| "[]".into())
    }
}

/// A stored ask.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AskRow {
    pub turn_id: String,
    pub ask_id: String,
    pub prompt: String,
    /// `confirm` or `select`.
    pub style: String,
    /// The choices; empty for a plain confirm, answered `yes` or `no`.
    pub options: Vec<String>,
    /// What a timeout answers.
    pub default_value: Option<String>,
    pub asked_at: UnixMs,
    /// `asked_at` plus the ask's `timeout_secs`.
    pub deadline: UnixMs,
    /// The answer (`None` while open, and for a timeout without a default).
    pub answer: Option<String>,
    /// The presser's open_id (`None` for a timeout).
    pub answered_by: Option<String>,
    /// When it was answered or timed out.
    pub answered_at: Option<UnixMs>,
    /// Answered by its timeout.
    pub timed_out: bool,
    /// When the answer was delivered to the agent.
    pub delivered_at: Option<UnixMs>,
}

crate::util::spelled::spelled! {
    /// Where an ask stands.
    #[derive(utoipa::ToSchema)]
    #[schema(rename_all = "snake_case")]
    pub enum AskState("ask state") {
        /// Waiting for an answer.
        Open,
        /// Answered by a user.
        Answered,
        /// Its timeout answered it (with its default, or nothing).
        TimedOut,
        /// Its turn ended before it was answered: no answer is taken.
        Closed,
    }
}

impl AskRow {
    /// Whether `value` is one of its choices (`yes`/`no` for a plain confirm).
    pub fn accepts(&self, value: &str) -> bool {
        if self.options.is_empty() {
            value == "yes" || value == "no"
        } else {
            self.options.iter().any(|o| o == value)
        }
    }

    /// Its state, given whether its turn still runs.
    pub fn state(&self, turn_running: bool) -> AskState {
        match (self.answered_at, self.timed_out) {
            (Some(_), true) => AskState::TimedOut,
            (Some(_), false) => AskState::Answered,
            (None, _) if turn_running => AskState::Open,
            (None, _) => AskState::Closed,
        }
    }
}

/// What a press on an answer button came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AnswerOutcome {
    /// Stored: the first answer.
    Answered(AskRow),
    /// It was answered (or timed out) before; nothing changed.
    AlreadyAnswered(AskRow),
    /// No such ask of this turn.
    Unknown,
    /// Its turn has ended: it takes no answer.
    TurnEnded,
    /// Not one of its choices.
    BadValue,
}

/// An answered ask claimed for delivery to its agent, and its profile.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimedAnswer {
    pub profile: String,
    pub ask: AskRow,
}

/// Asks and their answers.
#[async_trait]
pub trait AskStore: Send + Sync + 'static {
    /// A turn's asks, in the order of their events' seq.
    async fn turn_asks(&self, turn_id: &str) -> Result<Vec<AskRow>, StoreError>;
    /// One ask.
    async fn ask(&self, turn_id: &str, ask_id: &str) -> Result<Option<AskRow>, StoreError>;
    /// Stores `value` as the answer of an open ask of a running turn, pressed by `by`:
    /// the first answer wins; later ones change nothing.
    async fn answer_ask(
        &self,
        turn_id: &str,
        ask_id: &str,
        value: &str,
        by: &str,
        now: UnixMs,
    ) -> Result<AnswerOutcome, StoreError>;
    /// Answers the open asks of running turns whose deadline has passed with their
    /// default (or nothing), once: the asks it timed out.
    async fn time_out_asks(&self, now: UnixMs) -> Result<Vec<AskRow>, StoreError>;
    /// Claims the delivery of an answered, undelivered ask of a running turn for
    /// `owner` until `until` (renewing its own claim); `None` when there is nothing to
    /// deliver or another replica's claim still holds.
    async fn claim_answer_delivery(
        &self,
        turn_id: &str,
        ask_id: &str,
        owner: &str,
        now: UnixMs,
        until: UnixMs,
    ) -> Result<Option<ClaimedAnswer>, StoreError>;
    /// Marks a delivery claimed by `owner` done; `false` when its claim was lost.
    async fn mark_answer_delivered(
        &self,
        turn_id: &str,
        ask_id: &str,
        owner: &str,
        now: UnixMs,
    ) -> Result<bool, StoreError>;
    /// `(turn_id, ask_id)` of asks of running turns answered since `since` and not
    /// delivered, whose claim (if any) has run out by `now`; oldest answer first.
    async fn undelivered_answers(
        &self,
        now: UnixMs,
        since: UnixMs,
        limit: i64,
    ) -> Result<Vec<(String, String)>, StoreError>;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(options: &[&str]) -> AskRow {
        AskRow {
            turn_id: "turn_1".into(),
            ask_id: "q".into(),
            prompt: "p".into(),
            style: "select".into(),
            options: options.iter().map(|s| s.to_string()).collect(),
            default_value: None,
            asked_at: UnixMs(1),
            deadline: UnixMs(2),
            answer: None,
            answered_by: None,
            answered_at: None,
            timed_out: false,
            delivered_at: None,
        }
    }

    #[test]
    fn a_plain_confirm_takes_yes_or_no_and_a_select_its_options() {
        assert!(row(&[]).accepts("yes") && row(&[]).accepts("no"));
        assert!(!row(&[]).accepts("maybe"));
        assert!(row(&["a", "b"]).accepts("b") && !row(&["a", "b"]).accepts("yes"));
    }

    #[test]
    fn an_open_ask_of_an_ended_turn_is_closed() {
        let mut r = row(&[]);
        assert_eq!(r.state(true), AskState::Open);
        assert_eq!(r.state(false), AskState::Closed);
        r.answered_at = Some(UnixMs(3));
        assert_eq!(r.state(false), AskState::Answered);
        r.timed_out = true;
        assert_eq!(r.state(true), AskState::TimedOut);
    }
}
