//! A what-if selection against the real one, and the readable report of both.

use std::fmt::Write;

use super::{
    recorded::Recorded,
    shape::{Diff, Trimmed, WhatIf, WouldBe},
};
use crate::context::report::{ExcludedItem, SelectedItem};

/// `would_be` against the decision `rec`.
pub(super) fn compare(rec: &Recorded, would_be: &WouldBe) -> Diff {
    let items: Vec<&SelectedItem> = would_be
        .selected
        .iter()
        .filter(|s| s.item_id != 0)
        .collect();
    let added: Vec<SelectedItem> = items
        .iter()
        .filter(|s| !rec.selected_ids.contains(&s.item_id))
        .map(|s| (*s).clone())
        .collect();
    let dropped: Vec<ExcludedItem> = rec
        .selected_ids
        .iter()
        .filter(|id| !items.iter().any(|s| s.item_id == **id))
        .map(|id| {
            would_be
                .excluded
                .iter()
                .find(|e| e.item_id == *id)
                .cloned()
                .unwrap_or_else(|| ExcludedItem {
                    item_id: *id,
                    item_type: rec.kinds.get(id).map(|k| k.0.clone()).unwrap_or_default(),
                    reason: if rec.thread_ids.contains(id) {
                        "thread_context_off"
                    } else {
                        "pending_history_off"
                    }
                    .into(),
                    created_at: rec.kinds.get(id).and_then(|k| k.1),
                })
        })
        .collect();
    let trimmed: Vec<Trimmed> = items
        .iter()
        .filter_map(|s| {
            let before = rec.selected.get(&s.item_id)?;
            (before.chars != s.chars || before.truncated != s.truncated).then(|| Trimmed {
                item_id: s.item_id,
                item_type: s.item_type.clone(),
                chars_before: before.chars,
                chars_after: s.chars,
                truncated_before: before.truncated,
                truncated_after: s.truncated,
            })
        })
        .collect();
    let unchanged = added.is_empty() && dropped.is_empty() && trimmed.is_empty();
    Diff {
        added,
        dropped,
        trimmed,
        unchanged,
    }
}

/// The readable report of a what-if (the CLI's, without `--json`).
pub fn render_what_if(w: &WhatIf) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "decision     {} (what-if)", w.decision_id);
    let _ = writeln!(out, "profile      {}", w.profile);
    let _ = writeln!(out, "root         {}", w.root_msg_id);
    let _ = writeln!(out, "message      {}", w.message_id);
    out.push_str("settings:\n");
    for (key, before, after) in w.recorded.beside(&w.settings) {
        if before == after {
            let _ = writeln!(out, "  {key:<26} {after}");
        } else {
            let _ = writeln!(out, "  {key:<26} {before} → {after}");
        }
    }
    let s = &w.selection;
    let _ = writeln!(
        out,
        "would select ({}, {} chars):",
        s.selected.len(),
        s.context_chars
    );
    for i in &s.selected {
        let cut = if i.truncated { " [truncated]" } else { "" };
        let _ = writeln!(
            out,
            "  #{:<5} {:<16} {} ({} chars){cut}",
            i.item_id, i.item_type, i.author_label, i.chars
        );
    }
    let _ = writeln!(out, "would exclude ({}):", s.excluded.len());
    for e in &s.excluded {
        let _ = writeln!(out, "  #{:<5} {:<16} {}", e.item_id, e.item_type, e.reason);
    }
    let d = &w.diff;
    if d.unchanged {
        out.push_str("diff: unchanged\n");
    } else {
        out.push_str("diff:\n");
        for a in &d.added {
            let _ = writeln!(
                out,
                "  + #{} {} {} ({} chars)",
                a.item_id, a.item_type, a.author_label, a.chars
            );
        }
        for e in &d.dropped {
            let _ = writeln!(out, "  - #{} {} ({})", e.item_id, e.item_type, e.reason);
        }
        for t in &d.trimmed {
            let _ = writeln!(
                out,
                "  ~ #{} {} {} → {} chars, truncated {} → {}",
                t.item_id,
                t.item_type,
                t.chars_before,
                t.chars_after,
                t.truncated_before,
                t.truncated_after
            );
        }
    }
    if !w.notes.is_empty() {
        out.push_str("notes:\n");
        for n in &w.notes {
            let _ = writeln!(out, "  - {n}");
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn item(item_id: i64, chars: usize, truncated: bool) -> SelectedItem {
        SelectedItem {
            item_id,
            item_type: "agent_output".into(),
            author_label: "coder (agent)".into(),
            chars,
            preview: String::new(),
            truncated,
            created_at: None,
        }
    }

    #[test]
    fn added_dropped_and_trimmed_against_the_record() {
        let mut rec = Recorded {
            thread_ids: vec![1, 2, 3],
            selected_ids: vec![1, 2],
            ..Recorded::default()
        };
        rec.selected.insert(1, item(1, 100, false));
        rec.selected.insert(2, item(2, 50, false));
        let would_be = WouldBe {
            selected: vec![item(0, 9, false), item(2, 20, true), item(3, 5, false)],
            excluded: vec![ExcludedItem {
                item_id: 1,
                item_type: "agent_output".into(),
                reason: "limit".into(),
                created_at: None,
            }],
            diagnostics: serde_json::Value::Null,
            context_chars: 34,
        };
        let d = compare(&rec, &would_be);
        assert!(!d.unchanged);
        assert_eq!(d.added.iter().map(|a| a.item_id).collect::<Vec<_>>(), [3]);
        assert_eq!(d.dropped.len(), 1);
        assert_eq!(
            (d.dropped[0].item_id, d.dropped[0].reason.as_str()),
            (1, "limit")
        );
        assert_eq!(
            d.trimmed,
            [Trimmed {
                item_id: 2,
                item_type: "agent_output".into(),
                chars_before: 50,
                chars_after: 20,
                truncated_before: false,
                truncated_after: true,
            }]
        );
        let same = WouldBe {
            selected: vec![item(1, 100, false), item(2, 50, false)],
            excluded: Vec::new(),
            diagnostics: serde_json::Value::Null,
            context_chars: 150,
        };
        assert!(compare(&rec, &same).unchanged);
        let off = WouldBe {
            selected: Vec::new(),
            ..same
        };
        let d = compare(&rec, &off);
        assert!(d.dropped.iter().all(|e| e.reason == "thread_context_off"));
    }
}
