//! Handoffs between the hub's bots: one profile's answer asks another profile of the
//! same hub to take over, in the same thread. The pure part: which profile an answer
//! hands to (an `<at>` of that bot's open_id), the chain a handoff continues (its root
//! person, hop and path of profiles), whether the target may run for that person (the
//! permission follows the person, not the bot), and the loop guard (hop limit, one round
//! trip of ping-pong at most, a thread's hourly budget).

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::{
    permission::{Sender, group_admits, may_invoke, owner_of},
    verdict::Reason,
};
use crate::config::{Profile, Workspace};

/// The person whose request started a chain: every hop runs on their behalf.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Requester {
    /// Their open_id as the first bot's app saw it.
    pub open_id: String,
    /// Their union_id (per developer), when known.
    #[serde(default)]
    pub union_id: Option<String>,
    /// Their user_id (per tenant), when known.
    #[serde(default)]
    pub user_id: Option<String>,
    /// Their display name, when known.
    #[serde(default)]
    pub name: Option<String>,
}

impl Requester {
    /// As a sender for the permission checks.
    pub fn sender(&self) -> Sender<'_> {
        Sender {
            open_id: Some(&self.open_id),
            union_id: self.union_id.as_deref(),
            user_id: self.user_id.as_deref(),
            sender_type: "user",
        }
    }

    /// Their name, else their open_id.
    pub fn label(&self) -> &str {
        self.name.as_deref().unwrap_or(&self.open_id)
    }
}

crate::util::spelled::spelled! {
    /// How an answer asked for a handoff.
    pub enum Via("handoff via") {
        /// An `<at>` of the target bot in the answer.
        Mention,
        /// The agent's structured `handoff` field.
        Field,
    }
}

/// Where a turn stands in a handoff chain (carried in the turn's job, so it survives a
/// restart).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Chain {
    /// `chain_<hex>`, derived from the turn of the person's request.
    pub chain_id: String,
    /// 1 for the first handoff turn (the person's own turn is hop 0).
    pub hop: u32,
    /// The person whose request started it.
    pub root: Requester,
    /// The profiles that ran, in order, this one last.
    pub path: Vec<String>,
    /// The turn that handed over to this one.
    pub parent_turn_id: String,
    /// Its profile.
    pub from_profile: String,
    /// How it asked.
    pub via: Via,
}

impl Chain {
    /// The chain a handoff from `turn_id` of `profile` to `target` continues: `parent`
    /// (the handing turn's own chain), or a new one rooted at `root`.
    pub fn next(
        parent: Option<&Chain>,
        (turn_id, profile): (&str, &str),
        root: Requester,
        target: &str,
        via: Via,
    ) -> Self {
        let (chain_id, hop, root, mut path) = match parent {
            Some(c) => (c.chain_id.clone(), c.hop, c.root.clone(), c.path.clone()),
            None => (
                format!("chain_{}", digest(&[turn_id])[..24].to_owned()),
                0,
                root,
                vec![profile.to_string()],
            ),
        };
        path.push(target.to_string());
        Self {
            chain_id,
            hop: hop + 1,
            root,
            path,
            parent_turn_id: turn_id.to_string(),
            from_profile: profile.to_string(),
            via,
        }
    }

    /// The turn id of the handoff from `parent_turn_id` to `target`: the same for every
    /// attempt, so a completion written again never queues it twice.
    pub fn turn_id(&self) -> String {
        let target = self.path.last().map(String::as_str).unwrap_or_default();
        format!("turn_{}", &digest(&[&self.parent_turn_id, target])[..32])
    }

    /// The path as stored: profiles joined by `>`.
    pub fn path_text(&self) -> String {
        self.path.join(">")
    }
}

/// Hex SHA-256 of `parts` joined by a separator no id contains.
fn digest(parts: &[&str]) -> String {
    let mut h = Sha256::new();
    for (i, p) in parts.iter().enumerate() {
        if i > 0 {
            h.update([0x1f]);
        }
        h.update(p.as_bytes());
    }
    hex::encode(h.finalize())
}

crate::util::spelled::spelled! {
    /// What became of a handoff asked for (a metrics label, and what is stored).
    pub enum HandoffOutcome("handoff outcome") {
        /// The target's turn was queued.
        Started,
        /// The person may not invoke the target in that chat.
        Refused,
        /// The chain reached its hop limit.
        CutHops,
        /// A→B→A→B: more than one round trip between two bots.
        CutPingpong,
        /// The thread spent its handoffs of the hour.
        CutBudget,
        /// Queued, then stopped with `/stop` before it ran.
        Cancelled,
    }
}

impl HandoffOutcome {
    /// The verdict reason the target profile records for it.
    pub fn reason(self, refused: Option<Reason>) -> Reason {
        match self {
            Self::Started => Reason::Handoff,
            Self::Refused => refused.unwrap_or(Reason::UserNotAllowed),
            _ => Reason::HandoffCut,
        }
    }

    /// The one line said in the thread when a chain stops here (`None` when it runs).
    pub fn note(self, from: &str, to: &str, person: &str, max_hops: u32) -> Option<String> {
        Some(match self {
            Self::Started | Self::Cancelled => return None,
            Self::Refused => {
                format!("Not handed to {to}: {person} may not ask {to} in this chat.")
            }
            Self::CutHops => format!(
                "Handoff from {from} to {to} stopped: this chain reached its limit of {max_hops} handoffs."
            ),
            Self::CutPingpong => format!(
                "Handoff from {from} to {to} stopped: the two bots already went back and forth once."
            ),
            Self::CutBudget => format!(
                "Handoff from {from} to {to} stopped: this thread used its handoffs for the hour."
            ),
        })
    }
}

/// The loop guard's limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Guard {
    /// Most handoff turns in one chain.
    pub max_hops: u32,
    /// Most handoff turns started in one thread per hour.
    pub thread_budget_per_hour: u32,
}

impl Guard {
    /// Whether `next` (the chain the target would run in) may run, given how many
    /// handoff turns its thread started in the last hour.
    pub fn check(&self, next: &Chain, started_last_hour: i64) -> Result<(), HandoffOutcome> {
        if next.hop > self.max_hops {
            return Err(HandoffOutcome::CutHops);
        }
        if ping_pong(&next.path) {
            return Err(HandoffOutcome::CutPingpong);
        }
        if started_last_hour >= i64::from(self.thread_budget_per_hour) {
            return Err(HandoffOutcome::CutBudget);
        }
        Ok(())
    }
}

/// Whether a path ends in a second round trip between two bots: A→B→A is one round
/// trip and allowed; A→B→A→B is cut.
fn ping_pong(path: &[String]) -> bool {
    let n = path.len();
    n >= 4 && path[n - 1] == path[n - 3] && path[n - 2] == path[n - 4] && path[n - 1] != path[n - 2]
}

/// Whether the person may invoke `target` in `chat_id` (its group settings, its
/// `allow_chats`, its `allow_users` and an `owner_only` workspace's owner), as if they
/// had asked it there themselves. `Err` names the reason.
pub fn admit(
    target: &Profile,
    workspace: Option<&Workspace>,
    chat_id: &str,
    person: &Requester,
) -> Result<(), Reason> {
    group_admits(target, chat_id)?;
    may_invoke(target, owner_of(workspace), &person.sender())
}

/// The open_ids an answer mentions with `<at …>` tags (`user_id`, `open_id` or `id`
/// attributes), in order, each once.
pub fn mentioned_ids(answer: &str) -> Vec<String> {
    let mut ids: Vec<String> = Vec::new();
    let lower = answer.to_ascii_lowercase();
    let mut from = 0;
    while let Some(at) = lower[from..].find("<at") {
        let start = from + at + 3;
        let end = lower[start..].find('>').map_or(lower.len(), |e| start + e);
        let tag = &answer[start..end];
        if tag.starts_with(|c: char| c.is_whitespace())
            && let Some(id) = attribute(tag)
            && !ids.contains(&id)
        {
            ids.push(id);
        }
        from = end.min(lower.len());
        if from >= lower.len() {
            break;
        }
    }
    ids
}

/// `text` with each `<at …>name</at>` written as `@name` (a request handed to another
/// bot reads as a person would read the answer).
pub fn plain_mentions(text: &str) -> String {
    let lower = text.to_ascii_lowercase();
    let mut out = String::with_capacity(text.len());
    let mut from = 0;
    while let Some(at) = lower[from..].find("<at") {
        let start = from + at;
        let open_end = lower[start..].find('>').map(|e| start + e + 1);
        let close = open_end.and_then(|o| lower[o..].find("</at>").map(|c| (o, o + c)));
        let is_tag = lower[start + 3..].starts_with(|c: char| c.is_whitespace());
        match close.filter(|_| is_tag) {
            Some((name_start, name_end)) => {
                out.push_str(&text[from..start]);
                out.push('@');
                out.push_str(text[name_start..name_end].trim());
                from = name_end + "</at>".len();
            }
            None => {
                out.push_str(&text[from..start + 3]);
                from = start + 3;
            }
        }
    }
    out.push_str(&text[from..]);
    out
}

/// The id named by a tag's `user_id`, `open_id` or `id` attribute.
fn attribute(tag: &str) -> Option<String> {
    let mut rest = tag.trim();
    while !rest.is_empty() {
        let (key, after) = rest.split_once('=')?;
        let key = key.trim().to_ascii_lowercase();
        let after = after.trim_start();
        let (value, tail) = match after.chars().next() {
            Some(q @ ('"' | '\'')) => {
                let inner = &after[1..];
                let close = inner.find(q).unwrap_or(inner.len());
                (&inner[..close], inner.get(close + 1..).unwrap_or_default())
            }
            _ => {
                let stop = after
                    .find(|c: char| c.is_whitespace() || c == '/')
                    .unwrap_or(after.len());
                (&after[..stop], &after[stop..])
            }
        };
        if matches!(key.as_str(), "user_id" | "open_id" | "id") && !value.is_empty() {
            return Some(value.to_string());
        }
        rest = tail.trim_start();
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn person() -> Requester {
        Requester {
            open_id: "ou_alice".into(),
            union_id: None,
            user_id: None,
            name: Some("Alice".into()),
        }
    }

    #[test]
    fn mentions_are_read_from_every_form_of_at_tag() {
        let answer = r#"Done. <at user_id="ou_b">coder</at>, then <AT id=ou_c></AT> and <at open_id='ou_b'>x</at>; <atom> <at email=a@b.c></at>"#;
        assert_eq!(mentioned_ids(answer), ["ou_b", "ou_c"]);
        assert!(mentioned_ids("no tags <b>here</b>").is_empty());
        assert!(mentioned_ids("<at user_id=").is_empty());
    }

    #[test]
    fn mentions_read_as_names_in_a_handed_request() {
        assert_eq!(
            plain_mentions(r#"<at user_id="ou_b">coder</at> please build it; <at id=all></at>"#),
            "@coder please build it; @"
        );
        assert_eq!(plain_mentions("a <atom> and <at"), "a <atom> and <at");
    }

    #[test]
    fn a_chain_grows_by_one_hop_with_a_stable_id_and_turn_ids() {
        let first = Chain::next(None, ("turn_1", "planner"), person(), "coder", Via::Mention);
        assert_eq!(
            (first.hop, first.path_text().as_str()),
            (1, "planner>coder")
        );
        let again = Chain::next(None, ("turn_1", "planner"), person(), "coder", Via::Mention);
        assert_eq!(first.chain_id, again.chain_id);
        assert_eq!(first.turn_id(), again.turn_id());
        let other = Chain::next(
            None,
            ("turn_1", "planner"),
            person(),
            "tester",
            Via::Mention,
        );
        assert_ne!(first.turn_id(), other.turn_id());
        let second = Chain::next(
            Some(&first),
            ("turn_2", "coder"),
            person(),
            "planner",
            Via::Field,
        );
        assert_eq!(second.chain_id, first.chain_id);
        assert_eq!(
            (second.hop, second.path_text().as_str()),
            (2, "planner>coder>planner")
        );
        assert_eq!(second.root, person());
    }

    #[test]
    fn the_guard_cuts_hops_a_second_round_trip_and_a_spent_budget() {
        let guard = Guard {
            max_hops: 4,
            thread_budget_per_hour: 20,
        };
        let a = Chain::next(None, ("t0", "a"), person(), "b", Via::Mention);
        assert_eq!(guard.check(&a, 0), Ok(()));
        let aba = Chain::next(Some(&a), ("t1", "b"), person(), "a", Via::Mention);
        assert_eq!(guard.check(&aba, 0), Ok(()), "one round trip");
        let abab = Chain::next(Some(&aba), ("t2", "a"), person(), "b", Via::Mention);
        assert_eq!(guard.check(&abab, 0), Err(HandoffOutcome::CutPingpong));
        let abac = Chain::next(Some(&aba), ("t2", "a"), person(), "c", Via::Mention);
        assert_eq!(guard.check(&abac, 0), Ok(()));
        let limited = Guard {
            max_hops: 2,
            ..guard
        };
        assert_eq!(limited.check(&abac, 0), Err(HandoffOutcome::CutHops));
        assert_eq!(guard.check(&a, 20), Err(HandoffOutcome::CutBudget));
        assert_eq!(guard.check(&a, 19), Ok(()));
    }
}
