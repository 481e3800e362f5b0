//! The deterministic selector: which recorded items a turn sees, and why the others do
//! not. Pure: the store feeds it candidates, it returns a [`Selection`].
//!
//! Thread context mode:
//! * a command carries no context;
//! * the turn's own request never comes back (a root that *is* the request is excluded);
//! * `shared`: the topic root, the discussion, and other profiles' agent outputs under the
//!   same root; `owner_only`: other profiles' agent outputs and this profile's topic root;
//! * never this bridge's own outputs;
//! * oldest → newest in the order things were said ([`said_order`]), then the oldest are
//!   trimmed until both the item limit and the character budget hold;
//! * agent outputs over `max_agent_output_chars` carry the truncated text and a flag.
//!
//! Pending-history mode: what this profile observed in the history scope since the last
//! accepted turn, in the order it was said, with senders, at most 50 (oldest dropped).
//! In `owner_only` it is empty: the only records there are main-chat messages kept as
//! topic roots (for threads under them), which is chatter nobody addressed to the bot.
//!
//! Said order, not record order: bots record a thread independently and chats are
//! processed side by side, so one bot's answer can be recorded before another bot
//! records the question it answers. Feishu's create time is the one clock every record
//! of a message shares.

use serde::Serialize;

use crate::vocab::{Candidate, Exclusion, ItemType};
use crate::{config::WorkspaceMode, util::UnixMs};

/// What the selection is for.
#[derive(Debug, Clone)]
pub struct Request<'a> {
    /// This profile's app id: its own outputs never come back.
    pub bridge_id: &'a str,
    /// This profile's name.
    pub profile: &'a str,
    /// Workspace mode (`shared` outside configured workspaces).
    pub mode: WorkspaceMode,
    /// The request message: its own records never come back.
    pub message_id: &'a str,
    /// The request is a command.
    pub is_command: bool,
    /// Item budget.
    pub limit: usize,
    /// Character budget.
    pub max_chars: usize,
    /// Longest agent output injected as is.
    pub max_agent_output_chars: usize,
}

/// One selected item.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Selected {
    pub item_id: i64,
    /// The message whose text this is (a recall of it must reach the decision).
    pub message_id: String,
    /// When that message was said.
    pub created_at: UnixMs,
    /// What the item is.
    pub item_type: ItemType,
    pub author_label: String,
    /// Text as injected.
    pub text: String,
    /// The text was cut.
    pub truncated: bool,
}

/// One candidate that was not selected, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Excluded {
    pub item_id: i64,
    /// What the item is.
    pub item_type: ItemType,
    /// Why it was left out.
    pub reason: Exclusion,
    /// When its message was said.
    pub created_at: UnixMs,
}

/// Counts and budgets of one selection.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Diagnostics {
    /// Candidates looked at.
    pub candidates: usize,
    /// Eligible before trimming.
    pub eligible: usize,
    pub selected: usize,
    /// Characters of the eligible items.
    pub chars_before: usize,
    /// Characters of the selected items.
    pub chars_after: usize,
    /// Item budget.
    pub limit: usize,
    /// Character budget.
    pub max_chars: usize,
    /// Which budget cut: `limit`, `chars`, `limit+chars`, or none.
    pub cut_by: Option<String>,
    /// Items whose text was cut to `max_agent_output_chars`.
    pub truncated: usize,
}

/// The result.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Selection {
    /// Selected, oldest first (in [`said_order`]).
    pub selected: Vec<Selected>,
    /// Not selected, with reasons: those the rules left out, then those the item limit
    /// and then the character budget trimmed, each group in said order.
    pub excluded: Vec<Excluded>,
    /// Counts.
    pub diagnostics: Diagnostics,
}

/// The marker appended to cut text.
pub const TRUNCATION_MARKER: &str = "…[truncated]";

/// Cuts `text` to at most `max` characters including the marker.
pub fn truncate(text: &str, max: usize) -> (String, bool) {
    if text.chars().count() <= max {
        return (text.to_string(), false);
    }
    let keep = max.saturating_sub(TRUNCATION_MARKER.chars().count());
    let mut out: String = text.chars().take(keep).collect();
    out.push_str(TRUNCATION_MARKER);
    (out, true)
}

/// Selects the thread context for a turn from `candidates` (any order).
pub fn select_thread(req: &Request<'_>, mut candidates: Vec<Candidate>) -> Selection {
    let total = candidates.len();
    let (eligible, mut excluded) = sift(req, &mut candidates, |c| {
        if c.item_type == ItemType::AgentOutput && c.bridge_id == req.bridge_id {
            Some(Exclusion::OwnOutput)
        } else if c.item_type != ItemType::AgentOutput && c.bot_profile != req.profile {
            // Another bot's record of the discussion: this bot relies on its own view.
            Some(Exclusion::OtherProfile)
        } else if req.mode == WorkspaceMode::OwnerOnly && c.item_type == ItemType::HumanMessage {
            Some(Exclusion::Mode)
        } else {
            None
        }
    });
    let mut diagnostics = Diagnostics {
        candidates: total,
        eligible: eligible.len(),
        limit: req.limit,
        max_chars: req.max_chars,
        ..Diagnostics::default()
    };
    let mut picked: Vec<Selected> = eligible
        .iter()
        .map(|c| {
            let (text, cut) = if c.item_type == ItemType::AgentOutput {
                truncate(&c.text, req.max_agent_output_chars)
            } else {
                (c.text.clone(), false)
            };
            selected(c, text, cut || c.truncated)
        })
        .collect();
    diagnostics.truncated = picked.iter().filter(|s| s.truncated).count();
    diagnostics.chars_before = total_chars(&picked);

    // Trim from the oldest side: first the item limit, then the character budget.
    let mut cut = Vec::new();
    if picked.len() > req.limit {
        let over = picked.len() - req.limit;
        excluded.extend(picked.drain(..over).map(|s| dropped(&s, Exclusion::Limit)));
        cut.push(Exclusion::Limit.as_str());
    }
    let mut chars = total_chars(&picked);
    let mut cut_chars = false;
    while chars > req.max_chars && !picked.is_empty() {
        let s = picked.remove(0);
        chars -= s.text.chars().count();
        excluded.push(dropped(&s, Exclusion::Chars));
        cut_chars = true;
    }
    if cut_chars {
        cut.push(Exclusion::Chars.as_str());
    }
    diagnostics.cut_by = (!cut.is_empty()).then(|| cut.join("+"));
    diagnostics.selected = picked.len();
    diagnostics.chars_after = chars;
    Selection {
        selected: picked,
        excluded,
        diagnostics,
    }
}

/// Most pending-history messages per scope.
pub const PENDING_CAP: usize = 50;

/// Rows a pending-history read asks for: one more than [`PENDING_CAP`], so the selector
/// sees that some were left out.
pub const PENDING_READ: i64 = PENDING_CAP as i64 + 1;

/// Rows a thread read asks for under an item limit: room for the limit twice over (the
/// character budget and the topic root's own block leave some out) and a margin.
pub fn thread_read_window(limit: usize) -> i64 {
    i64::try_from(limit.saturating_mul(2).saturating_add(32)).unwrap_or(i64::MAX)
}

/// Selects pending history: `candidates` are the scope's observed messages after the
/// watermark (any order); the newest [`PENDING_CAP`] are kept in said order.
pub fn select_pending(
    req: &Request<'_>,
    mut candidates: Vec<Candidate>,
    skip_items: &[i64],
) -> Selection {
    let total = candidates.len();
    let (kept, mut excluded) = sift(req, &mut candidates, |c| {
        if req.mode == WorkspaceMode::OwnerOnly {
            Some(Exclusion::Mode)
        } else {
            skip_items
                .contains(&c.item_id)
                .then_some(Exclusion::InThreadContext)
        }
    });
    let mut kept: Vec<Selected> = kept
        .into_iter()
        .map(|c| selected(c, c.text.clone(), false))
        .collect();
    let eligible = kept.len();
    let chars_before = total_chars(&kept);
    let mut cut_by = None;
    if kept.len() > PENDING_CAP {
        let over = kept.len() - PENDING_CAP;
        excluded.extend(kept.drain(..over).map(|s| dropped(&s, Exclusion::Limit)));
        cut_by = Some(Exclusion::Limit.to_string());
    }
    let chars_after = total_chars(&kept);
    Selection {
        diagnostics: Diagnostics {
            candidates: total,
            eligible,
            selected: kept.len(),
            chars_before,
            chars_after,
            limit: PENDING_CAP,
            max_chars: 0,
            cut_by,
            truncated: 0,
        },
        selected: kept,
        excluded,
    }
}

/// The order things were said in: Feishu's create time, then the message id (compared
/// as bytes, as both databases order it), then the record's id (one message's records
/// stay in write order). A total order: any input order sorts the same.
pub fn said_order(c: &Candidate) -> (UnixMs, &str, i64) {
    (c.created_at, c.message_id.as_str(), c.event_id)
}

/// Sorts `candidates` into said order and splits them into the eligible and the
/// excluded: first by the rules every selection shares (a command carries no context, a
/// recalled message is gone, a turn's own request is not its context), then by `why`.
fn sift<'a>(
    req: &Request<'_>,
    candidates: &'a mut [Candidate],
    why: impl Fn(&Candidate) -> Option<Exclusion>,
) -> (Vec<&'a Candidate>, Vec<Excluded>) {
    candidates.sort_by(|a, b| said_order(a).cmp(&said_order(b)));
    let mut eligible = Vec::new();
    let mut excluded = Vec::new();
    for c in candidates.iter() {
        let reason = if req.is_command {
            Some(Exclusion::Command)
        } else if c.recalled {
            Some(Exclusion::Recalled)
        } else if c.message_id == req.message_id {
            Some(Exclusion::SameTurnRequest)
        } else {
            why(c)
        };
        match reason {
            Some(r) => excluded.push(exclusion(c, r)),
            None => eligible.push(c),
        }
    }
    (eligible, excluded)
}

fn selected(c: &Candidate, text: String, truncated: bool) -> Selected {
    Selected {
        item_id: c.item_id,
        message_id: c.message_id.clone(),
        created_at: c.created_at,
        item_type: c.item_type,
        author_label: c.author_label.clone(),
        text,
        truncated,
    }
}

fn total_chars(items: &[Selected]) -> usize {
    items.iter().map(|s| s.text.chars().count()).sum()
}

/// `c`, left out for `reason`.
pub fn exclusion(c: &Candidate, reason: Exclusion) -> Excluded {
    Excluded {
        item_id: c.item_id,
        item_type: c.item_type,
        reason,
        created_at: c.created_at,
    }
}

fn dropped(s: &Selected, reason: Exclusion) -> Excluded {
    Excluded {
        item_id: s.item_id,
        item_type: s.item_type,
        reason,
        created_at: s.created_at,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cand(id: i64, item_type: &str, profile: &str, text: &str) -> Candidate {
        Candidate {
            item_id: id,
            event_id: id,
            created_at: UnixMs(1_000 * id),
            item_type: ItemType::parse(item_type).expect("a known item type"),
            bot_profile: profile.into(),
            bridge_id: format!("cli_{profile}"),
            message_id: format!("om_{id}"),
            author_label: profile.into(),
            text: text.into(),
            truncated: false,
            recalled: false,
        }
    }

    fn req(mode: WorkspaceMode) -> Request<'static> {
        Request {
            bridge_id: "cli_coder",
            profile: "coder",
            mode,
            message_id: "om_req",
            is_command: false,
            limit: 20,
            max_chars: 24_000,
            max_agent_output_chars: 20_000,
        }
    }

    fn ids(s: &Selection) -> Vec<i64> {
        s.selected.iter().map(|x| x.item_id).collect()
    }

    #[test]
    fn shared_mode_takes_root_discussion_and_other_bots_outputs_old_to_new() {
        let c = vec![
            cand(4, "agent_output", "coder", "my own earlier answer"),
            cand(1, "topic_root", "coder", "root"),
            cand(3, "agent_output", "planner", "plan"),
            cand(2, "human_message", "coder", "talk"),
            cand(5, "human_message", "planner", "planner's copy of talk"),
        ];
        let s = select_thread(&req(WorkspaceMode::Shared), c);
        assert_eq!(ids(&s), [1, 2, 3]);
        let reasons: Vec<_> = s
            .excluded
            .iter()
            .map(|e| (e.item_id, e.reason.as_str()))
            .collect();
        assert_eq!(reasons, [(4, "own_output"), (5, "other_profile")]);
    }

    #[test]
    fn owner_only_drops_discussion() {
        let c = vec![
            cand(1, "topic_root", "coder", "root"),
            cand(2, "human_message", "coder", "talk"),
            cand(3, "agent_output", "planner", "plan"),
        ];
        let s = select_thread(&req(WorkspaceMode::OwnerOnly), c);
        assert_eq!(ids(&s), [1, 3]);
        assert_eq!(s.excluded[0].reason, "mode");
    }

    #[test]
    fn trimming_cuts_the_oldest_for_items_then_chars_and_is_stable() {
        let c: Vec<_> = (1..=6)
            .map(|i| cand(i, "human_message", "coder", "0123456789"))
            .collect();
        let mut r = req(WorkspaceMode::Shared);
        r.limit = 4;
        r.max_chars = 25;
        let a = select_thread(&r, c.clone());
        let mut reversed = c;
        reversed.reverse();
        let b = select_thread(&r, reversed);
        assert_eq!(a, b, "input order does not matter");
        assert_eq!(ids(&a), [5, 6]);
        assert_eq!(a.diagnostics.cut_by.as_deref(), Some("limit+chars"));
        assert_eq!(
            (a.diagnostics.chars_before, a.diagnostics.chars_after),
            (60, 20)
        );
    }

    #[test]
    fn long_agent_outputs_are_truncated_and_flagged() {
        let mut r = req(WorkspaceMode::Shared);
        r.max_agent_output_chars = 20;
        let s = select_thread(
            &r,
            vec![cand(1, "agent_output", "planner", &"x".repeat(50))],
        );
        assert!(s.selected[0].truncated);
        assert_eq!(s.selected[0].text.chars().count(), 20);
        assert!(s.selected[0].text.ends_with(TRUNCATION_MARKER));
    }

    #[test]
    fn commands_and_the_request_itself_carry_nothing() {
        let mut r = req(WorkspaceMode::Shared);
        let mut root = cand(1, "topic_root", "coder", "root is the request");
        root.message_id = "om_req".into();
        let s = select_thread(&r, vec![root.clone()]);
        assert_eq!(s.excluded[0].reason, "same_turn_request");
        r.is_command = true;
        let s = select_thread(&r, vec![cand(2, "human_message", "coder", "x")]);
        assert!(s.selected.is_empty());
        assert_eq!(s.excluded[0].reason, "command");
    }

    /// Every order of `items`.
    fn permutations<T: Clone>(items: &[T]) -> Vec<Vec<T>> {
        if items.len() <= 1 {
            return vec![items.to_vec()];
        }
        let mut out = Vec::new();
        for i in 0..items.len() {
            let mut rest = items.to_vec();
            let first = rest.remove(i);
            for mut p in permutations(&rest) {
                p.insert(0, first.clone());
                out.push(p);
            }
        }
        out
    }

    #[test]
    fn every_input_order_selects_the_same_in_said_order() {
        let said =
            |event_id: i64, ms: i64, message_id: &str, item_type: &str, profile: &str| Candidate {
                created_at: UnixMs(ms),
                message_id: message_id.into(),
                ..cand(event_id, item_type, profile, message_id)
            };
        // Record order is not said order: the planner's answer (event 2) was recorded
        // before the questions it answers (events 5 and 6), and the planner's copy of
        // one of them (event 3) too. Two questions were said in the same millisecond:
        // their message ids, compared as bytes, order them ("om_B" < "om_a").
        let candidates = vec![
            said(1, 1_000, "om_root", "topic_root", "coder"),
            said(2, 3_000, "om_answer", "agent_output", "planner"),
            said(3, 2_000, "om_a", "human_message", "planner"),
            said(4, 2_500, "om_mine", "agent_output", "coder"),
            said(5, 2_000, "om_a", "human_message", "coder"),
            said(6, 2_000, "om_B", "human_message", "coder"),
        ];
        let mut r = req(WorkspaceMode::Shared);
        r.limit = 3;
        let first = select_thread(&r, candidates.clone());
        assert_eq!(ids(&first), [6, 5, 2], "questions, then the answer");
        let times: Vec<_> = first.selected.iter().map(|s| s.created_at.0).collect();
        assert_eq!(times, [2_000, 2_000, 3_000]);
        let reasons: Vec<_> = first
            .excluded
            .iter()
            .map(|e| (e.item_id, e.reason.as_str()))
            .collect();
        assert_eq!(
            reasons,
            [(3, "other_profile"), (4, "own_output"), (1, "limit")],
            "the oldest said is trimmed"
        );
        let history = select_pending(&r, candidates.clone(), &[]);
        assert_eq!(
            ids(&history),
            [1, 6, 3, 5, 4, 2],
            "one message's records by id"
        );
        let orders = permutations(&candidates);
        assert_eq!(orders.len(), 720);
        for order in orders {
            let events: Vec<_> = order.iter().map(|c| c.event_id).collect();
            let pending = select_pending(&r, order.clone(), &[]);
            assert_eq!(pending, history, "input order {events:?}");
            assert_eq!(select_thread(&r, order), first, "input order {events:?}");
        }
    }

    #[test]
    fn pending_history_keeps_the_newest_fifty_in_order() {
        let c: Vec<_> = (1..=55)
            .map(|i| cand(i, "human_message", "coder", "m"))
            .collect();
        let s = select_pending(&req(WorkspaceMode::Shared), c, &[]);
        assert_eq!(s.selected.len(), 50);
        assert_eq!(s.selected[0].item_id, 6);
        assert_eq!(s.excluded.len(), 5);
    }

    #[test]
    fn owner_only_has_no_pending_history() {
        let c = vec![
            cand(1, "topic_root", "coder", "main-chat chatter"),
            cand(2, "topic_root", "coder", "more of it"),
        ];
        let s = select_pending(&req(WorkspaceMode::OwnerOnly), c, &[]);
        assert!(s.selected.is_empty());
        assert!(s.excluded.iter().all(|e| e.reason == "mode"), "{s:?}");
        assert_eq!(s.excluded.len(), 2);
    }
}
