//! Carrying the daily digest over: the first turn of a session the digest reset is
//! given the digest's summary first ("Earlier in this chat"), counted against the
//! context budget. It is given until a turn of the new session succeeds; after that the
//! session's history holds it: the later turns' replay of that first turn (backends that
//! are handed the earlier turns, such as `openai`) carries the summary with its request.

use serde_json::{Value, json};

use crate::{
    context::{
        prompt::{self, PromptParts},
        report::{SelectedItem, preview},
        selector,
    },
    store::{CarriedDigest, DigestStore},
};

/// The summary takes at most this share of `context.max_context_chars` (one part in…).
pub const SHARE: usize = 4;
/// A share smaller than this leaves the summary out (too little to be worth reading).
pub const MIN_CHARS: usize = 40;

/// The summary as given to the turn.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Carried {
    pub digest_id: i64,
    /// The digest's local date.
    pub date: String,
    /// As injected (cut to its share).
    pub text: String,
    pub truncated: bool,
}

/// The summary a session's first turn was given, which the replay of that turn carries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Replay {
    /// The session's first turn that succeeded.
    pub turn_id: String,
    /// The summary, cut to its share.
    pub text: String,
}

/// What became of the carry-over for one turn.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CarryOver {
    /// Given to the turn.
    pub carried: Option<Carried>,
    /// Given to an earlier turn of the session, whose replay carries it.
    pub replay: Option<Replay>,
    /// `off`, `none`, `injected`, `truncated`, `in_history` (an earlier turn of the
    /// session had it), `over_budget`, `unreadable`.
    pub status: &'static str,
    /// The digest found (also when it was left out).
    pub digest_id: Option<i64>,
    /// Characters of the whole summary.
    pub chars_before: usize,
    /// The most it could take.
    pub max_chars: usize,
}

impl CarryOver {
    /// Off: `digest.carry_over = false`.
    pub fn off() -> Self {
        Self {
            status: "off",
            ..Self::default()
        }
    }

    /// Looks for the digest that reset the session `key` and cuts it to its share of
    /// `max_context_chars`. A store that cannot answer costs the summary, never the turn.
    pub async fn find<S: DigestStore + ?Sized>(
        store: &S,
        profile: &str,
        key: &str,
        max_context_chars: usize,
    ) -> Self {
        let max_chars = max_context_chars / SHARE;
        let found = match store.carried_digest(profile, key).await {
            Ok(found) => found,
            Err(e) => {
                tracing::warn!(profile, session_key = key, reason = %e.reason(), "the carried digest could not be read; the turn goes on without it");
                return Self {
                    status: "unreadable",
                    max_chars,
                    ..Self::default()
                };
            }
        };
        Self::of(found, max_chars)
    }

    /// The carry-over of `found`, cut to `max_chars`.
    pub fn of(found: Option<CarriedDigest>, max_chars: usize) -> Self {
        let Some(d) = found else {
            return Self {
                status: "none",
                max_chars,
                ..Self::default()
            };
        };
        let mut out = Self {
            status: "over_budget",
            digest_id: Some(d.id),
            chars_before: d.summary.chars().count(),
            max_chars,
            ..Self::default()
        };
        if max_chars < MIN_CHARS {
            return out;
        }
        let (text, truncated) = selector::truncate(&d.summary, max_chars);
        if let Some(turn_id) = d.first_turn {
            out.status = "in_history";
            out.replay = Some(Replay { turn_id, text });
            return out;
        }
        out.status = if truncated { "truncated" } else { "injected" };
        out.carried = Some(Carried {
            digest_id: d.id,
            date: d.date,
            text,
            truncated,
        });
        out
    }

    /// The text given, if any.
    pub fn text(&self) -> Option<&str> {
        self.carried.as_ref().map(|c| c.text.as_str())
    }

    /// The request of the earlier turn `turn_id` as replayed to the agent: the session's
    /// first turn carries the summary it was given, in the same block.
    pub fn replayed(&self, turn_id: &str, request: String) -> String {
        match &self.replay {
            Some(r) if r.turn_id == turn_id => prompt::assemble(&PromptParts {
                request: &request,
                carried: Some(&r.text),
                ..PromptParts::default()
            }),
            _ => request,
        }
    }

    /// Characters given.
    pub fn chars(&self) -> usize {
        self.text().map_or(0, |t| t.chars().count())
    }

    /// The explain item of the summary given.
    pub fn item(&self) -> Option<SelectedItem> {
        let c = self.carried.as_ref()?;
        Some(SelectedItem {
            item_id: 0,
            item_type: "carried_summary".into(),
            author_label: format!("digest of {}", c.date),
            chars: c.text.chars().count(),
            preview: preview(&c.text, 80),
            truncated: c.truncated,
            created_at: None,
        })
    }

    /// The decision's diagnostics of it.
    pub fn diagnostics(&self) -> Value {
        json!({
            "status": self.status,
            "digest_id": self.digest_id,
            "chars_before": self.chars_before,
            "chars_after": self.chars(),
            "max_chars": self.max_chars,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn digest(summary: &str) -> Option<CarriedDigest> {
        Some(CarriedDigest {
            id: 7,
            date: "2026-12-02".into(),
            summary: summary.into(),
            first_turn: None,
        })
    }

    #[test]
    fn a_summary_within_its_share_is_given_whole() {
        let c = CarryOver::of(digest("They agreed on the lake."), 6_000);
        assert_eq!(c.status, "injected");
        assert_eq!(c.text(), Some("They agreed on the lake."));
        let item = c.item().expect("an item");
        assert_eq!(
            (item.item_type.as_str(), item.truncated),
            ("carried_summary", false)
        );
    }

    #[test]
    fn a_long_summary_is_cut_to_its_share_and_says_so() {
        let long = "x".repeat(100);
        let c = CarryOver::of(digest(&long), 50);
        assert_eq!(c.status, "truncated");
        assert_eq!(c.chars(), 50);
        assert!(c.item().is_some_and(|i| i.truncated));
        assert_eq!(c.diagnostics()["chars_before"], 100);
    }

    #[test]
    fn a_share_too_small_leaves_it_out_visibly() {
        let c = CarryOver::of(digest("They agreed on the lake."), MIN_CHARS - 1);
        assert_eq!(
            (c.status, c.text(), c.digest_id),
            ("over_budget", None, Some(7))
        );
        assert!(c.item().is_none());
        assert_eq!(CarryOver::of(None, 6_000).status, "none");
    }

    #[test]
    fn once_a_turn_had_it_only_that_turns_replay_carries_it() {
        let mut d = digest("They agreed on the lake.");
        if let Some(d) = d.as_mut() {
            d.first_turn = Some("turn_1".into());
        }
        let c = CarryOver::of(d, 6_000);
        assert_eq!((c.status, c.text(), c.chars()), ("in_history", None, 0));
        let replayed = c.replayed("turn_1", "where?".into());
        assert!(replayed.starts_with(prompt::headers::EARLIER), "{replayed}");
        assert!(replayed.ends_with("They agreed on the lake.\n[User request]\nwhere?"));
        assert_eq!(c.replayed("turn_2", "and then?".into()), "and then?");
    }
}
