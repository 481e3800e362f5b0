//! The what-if answer as a page: the settings as recorded and as used, what they would
//! add, drop and trim, any notes on inputs that could not be had as they were, and the
//! whole would-be selection.

use super::super::html::{Html, encode};
use crate::{
    context::report::{ExcludedItem, SelectedItem},
    explain::{Diff, WhatIf},
};

/// The page body.
pub fn render(w: &WhatIf) -> Html {
    let back = format!(
        "/ui/threads/{}?profile={}#decision-{}",
        encode(&w.root_msg_id),
        encode(&w.profile),
        w.decision_id
    );
    let mut h = Html::new();
    h.raw("<h1>What if · decision ")
        .num(w.decision_id)
        .raw("</h1><p><a id=\"back\" href=\"")
        .text(&back)
        .raw("\">Back to the thread</a> · ")
        .text(&w.profile)
        .raw(" · request ")
        .el("<code>", &w.message_id, "</code>")
        .raw("</p>");
    h.html(&settings(w));
    h.html(&diff(&w.diff));
    if !w.notes.is_empty() {
        h.raw("<h2>Notes</h2><ul class=\"notes\">");
        for n in &w.notes {
            h.el("<li>", n, "</li>");
        }
        h.raw("</ul>");
    }
    h.raw("<section id=\"would-be\"><h2>The would-be selection</h2>");
    h.html(&selected(
        "Selected",
        "item would-select",
        &w.selection.selected,
    ));
    h.html(&excluded(
        "Excluded",
        "item would-exclude",
        &w.selection.excluded,
    ));
    h.raw("</section>");
    h
}

/// Recorded and used settings side by side; the changed ones marked.
fn settings(w: &WhatIf) -> Html {
    let mut h = Html::new();
    h.raw("<h2>Settings</h2><table class=\"settings\"><thead><tr><th>Setting</th>")
        .raw("<th>Recorded</th><th>What if</th></tr></thead><tbody>");
    for (key, before, after) in w.recorded.beside(&w.settings) {
        h.raw(if before == after {
            "<tr>"
        } else {
            "<tr class=\"changed\">"
        })
        .el("<td><code>", key, "</code></td>")
        .el("<td>", &before, "</td>")
        .el("<td>", &after, "</td></tr>");
    }
    h.raw("</tbody></table>");
    h
}

fn diff(d: &Diff) -> Html {
    let mut h = Html::new();
    h.raw("<section id=\"diff\"><h2>Difference</h2>");
    if d.unchanged {
        h.raw("<p id=\"unchanged\">No difference: these settings select what the decision selected.</p>");
    }
    h.html(&selected("Added", "item added", &d.added));
    h.html(&excluded("Dropped", "item dropped", &d.dropped));
    h.raw("<h3>Trimmed differently (")
        .num(len(d.trimmed.len()))
        .raw(")</h3>");
    if !d.trimmed.is_empty() {
        h.raw("<table class=\"trimmed\"><thead><tr><th>Item</th><th>Type</th>")
            .raw("<th>Characters</th><th>Truncated</th></tr></thead><tbody>");
        for t in &d.trimmed {
            h.raw("<tr class=\"item trimmed\"><td>")
                .num(t.item_id)
                .el("</td><td>", &t.item_type, "</td><td>")
                .num(len(t.chars_before))
                .raw(" → ")
                .num(len(t.chars_after))
                .raw("</td><td>")
                .raw(yes_no(t.truncated_before))
                .raw(" → ")
                .raw(yes_no(t.truncated_after))
                .raw("</td></tr>");
        }
        h.raw("</tbody></table>");
    }
    h.raw("</section>");
    h
}

fn yes_no(b: bool) -> &'static str {
    if b { "yes" } else { "no" }
}

fn len(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// A heading with the count, and the table's head when there are rows; `false`
/// when there are none (the heading alone is the answer).
fn counted_table(title: &'static str, rows: usize, head: &'static str) -> (Html, bool) {
    let mut h = Html::new();
    h.raw("<h3>")
        .raw(title)
        .raw(" (")
        .num(len(rows))
        .raw(")</h3>");
    if rows > 0 {
        h.raw("<table><thead><tr>")
            .raw(head)
            .raw("</tr></thead><tbody>");
    }
    (h, rows > 0)
}

fn selected(title: &'static str, class: &'static str, items: &[SelectedItem]) -> Html {
    let head = "<th>Item</th><th>Type</th><th>Author</th><th>Characters</th><th>Preview</th>";
    let (mut h, rows) = counted_table(title, items.len(), head);
    if !rows {
        return h;
    }
    for s in items {
        h.raw("<tr class=\"")
            .raw(class)
            .raw("\"><td>")
            .num(s.item_id)
            .el("</td><td>", &s.item_type, "</td>")
            .el("<td>", &s.author_label, "</td><td>")
            .num(len(s.chars));
        if s.truncated {
            h.raw(" <span class=\"badge trimmed\">trimmed</span>");
        }
        h.el("</td><td class=\"text\">", &s.preview, "</td></tr>");
    }
    h.raw("</tbody></table>");
    h
}

fn excluded(title: &'static str, class: &'static str, items: &[ExcludedItem]) -> Html {
    let head = "<th>Item</th><th>Type</th><th>Reason</th>";
    let (mut h, rows) = counted_table(title, items.len(), head);
    if !rows {
        return h;
    }
    for x in items {
        h.raw("<tr class=\"")
            .raw(class)
            .raw("\"><td>")
            .num(x.item_id)
            .el("</td><td>", &x.item_type, "</td>")
            .el(
                "<td><span class=\"badge reason\">",
                &x.reason,
                "</span></td></tr>",
            );
    }
    h.raw("</tbody></table>");
    h
}
