//! What a stored decision holds, taken apart for what-if explain: which candidates the
//! thread selector and the pending-history selector looked at, what was selected, the
//! blocks that stand outside the thread (kept as recorded), and the budgets used.
//!
//! The decision's lists are written in a fixed order (see `turns::gather`): selected
//! item ids are the thread's, then the pending history's; excluded items are the
//! thread selector's, then the thread's topic-root-block and in-feed ones, then the
//! pending-history selector's and its in-feed ones, then media. The diagnostics count
//! each selector's candidates and selections, which is how the lists are split.

use std::collections::HashMap;

use serde_json::Value;

use crate::{
    context::report::{ExcludedItem, SelectedItem},
    store::DecisionRow,
    util::UnixMs,
};

/// Blocks that stand before the thread items in the prompt's record.
const HEAD_BLOCKS: [&str; 3] = ["quoted_reply", "carried_summary", "topic_root_block"];

/// Exclusions the settings a what-if changes do not decide: kept as recorded.
const KEPT_REASONS: [&str; 2] = ["topic_root_block", "in_feed"];

/// One decision, taken apart.
#[derive(Debug, Default)]
pub(super) struct Recorded {
    pub thread_on: bool,
    pub history_on: bool,
    /// The candidates the thread selector looked at.
    pub thread_ids: Vec<i64>,
    /// Rows the thread read returned: its candidates and the ones kept out before the
    /// selector (the topic root with its own block, messages in the feed).
    pub thread_read: usize,
    /// The candidates the pending-history selector looked at.
    pub history_ids: Vec<i64>,
    /// Selected item ids (thread, then pending history).
    pub selected_ids: Vec<i64>,
    /// Selected items with their details, by id (empty once a recall scrubbed them).
    pub selected: HashMap<i64, SelectedItem>,
    /// Whether the selected items' details survive (a recall scrubs them).
    pub details: bool,
    /// The quoted reply, carried summary and topic root blocks.
    pub head: Vec<SelectedItem>,
    /// Media items.
    pub tail: Vec<SelectedItem>,
    /// Exclusions kept as recorded (topic root block, in feed, media).
    pub kept: Vec<ExcludedItem>,
    /// What each recorded item was, and when it was said (for purged items).
    pub kinds: HashMap<i64, (String, Option<UnixMs>)>,
    /// Budgets of the thread selector, when it ran: item limit and character budget
    /// (the carried summary already taken off).
    pub thread_budgets: Option<(usize, usize)>,
    /// Characters of the carried summary.
    pub carried_chars: usize,
    pub diagnostics: Value,
}

impl Recorded {
    /// Takes `row` apart.
    pub fn of(row: &DecisionRow) -> Self {
        let d = &row.decision;
        let selected: Vec<SelectedItem> =
            serde_json::from_str(&d.selected_json).unwrap_or_default();
        let excluded: Vec<ExcludedItem> =
            serde_json::from_str(&d.excluded_json).unwrap_or_default();
        let selected_ids: Vec<i64> =
            serde_json::from_str(&d.selected_item_ids_json).unwrap_or_default();
        let diagnostics: Value = serde_json::from_str(&d.diagnostics_json).unwrap_or_default();
        let count = |part: &str, key: &str| {
            diagnostics[part][key]
                .as_u64()
                .and_then(|n| usize::try_from(n).ok())
                .unwrap_or_default()
        };
        let mut r = Recorded {
            thread_on: d.mode.contains("thread_context"),
            history_on: d.mode.contains("pending_history"),
            details: !selected.is_empty() || selected_ids.is_empty(),
            ..Recorded::default()
        };
        let thread_selected = count("thread", "selected").min(selected_ids.len());
        r.thread_ids = selected_ids[..thread_selected].to_vec();
        r.history_ids = selected_ids[thread_selected..].to_vec();
        let thread_out = count("thread", "candidates").saturating_sub(thread_selected);
        let history_out =
            count("pending_history", "candidates").saturating_sub(r.history_ids.len());

        let mut rest = excluded.into_iter().peekable();
        for e in rest.by_ref().take(thread_out) {
            r.kinds
                .insert(e.item_id, (e.item_type.clone(), e.created_at));
            r.thread_ids.push(e.item_id);
        }
        while let Some(e) = rest.next_if(|e| KEPT_REASONS.contains(&e.reason.as_str())) {
            r.kept.push(e);
        }
        r.thread_read = r.thread_ids.len() + r.kept.len();
        for e in rest.by_ref().take(history_out) {
            r.kinds
                .insert(e.item_id, (e.item_type.clone(), e.created_at));
            r.history_ids.push(e.item_id);
        }
        r.kept.extend(rest);

        for s in selected {
            if s.item_id != 0 {
                r.kinds
                    .insert(s.item_id, (s.item_type.clone(), s.created_at));
                r.selected.insert(s.item_id, s);
            } else if HEAD_BLOCKS.contains(&s.item_type.as_str()) {
                if s.item_type == "carried_summary" {
                    r.carried_chars = s.chars;
                }
                r.head.push(s);
            } else {
                r.tail.push(s);
            }
        }
        r.selected_ids = selected_ids;
        if r.thread_on {
            r.thread_budgets = Some((count("thread", "limit"), count("thread", "max_chars")));
        }
        r.diagnostics = diagnostics;
        r
    }

    /// Whether the topic root had its own block.
    pub fn topic_root_injected(&self) -> bool {
        self.head.iter().any(|s| s.item_type == "topic_root_block")
            || self.diagnostics["topic_root"] == "injected"
    }

    /// Ids of the items whose exclusion is kept as recorded.
    pub fn kept_ids(&self) -> impl Iterator<Item = i64> + '_ {
        self.kept.iter().map(|e| e.item_id).filter(|id| *id != 0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::NewDecision;

    #[test]
    fn the_lists_split_by_the_diagnostics_counts() {
        let row = DecisionRow {
            id: 1,
            decision: NewDecision {
                mode: "thread_context+pending_history".into(),
                selected_item_ids_json: "[3,4,7]".into(),
                selected_json: r#"[
                    {"item_id":0,"item_type":"carried_summary","author_label":"","chars":9,"preview":"","truncated":false},
                    {"item_id":3,"item_type":"human_message","author_label":"a","chars":2,"preview":"","truncated":false},
                    {"item_id":4,"item_type":"human_message","author_label":"a","chars":2,"preview":"","truncated":false},
                    {"item_id":7,"item_type":"human_message","author_label":"a","chars":2,"preview":"","truncated":false},
                    {"item_id":0,"item_type":"image","author_label":"","chars":5,"preview":"","truncated":false}
                ]"#
                .into(),
                excluded_json: r#"[
                    {"item_id":1,"item_type":"human_message","reason":"limit"},
                    {"item_id":2,"item_type":"topic_root","reason":"topic_root_block"},
                    {"item_id":5,"item_type":"human_message","reason":"in_feed"},
                    {"item_id":6,"item_type":"human_message","reason":"in_thread_context"},
                    {"item_id":0,"item_type":"image","reason":"too_large"}
                ]"#
                .into(),
                diagnostics_json: r#"{"thread":{"candidates":3,"selected":2,"limit":2,"max_chars":100},
                    "pending_history":{"candidates":2,"selected":1}}"#
                    .into(),
                ..NewDecision::default()
            },
        };
        let r = Recorded::of(&row);
        assert_eq!(r.thread_ids, [3, 4, 1]);
        assert_eq!(r.history_ids, [7, 6]);
        assert_eq!(r.thread_read, 5);
        let kept: Vec<_> = r.kept.iter().map(|e| e.reason.as_str()).collect();
        assert_eq!(kept, ["topic_root_block", "in_feed", "too_large"]);
        assert_eq!((r.head.len(), r.tail.len(), r.carried_chars), (1, 1, 9));
        assert_eq!(r.thread_budgets, Some((2, 100)));
        assert!(r.details);
    }
}
