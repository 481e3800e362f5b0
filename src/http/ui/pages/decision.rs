//! The thread page's context decisions: for each, what was selected (and trimmed), what
//! was left out and why, the prompt, and the what-if form.

use super::{
    super::html::{Html, time},
    records::Thread,
    what_if,
};
use crate::{
    context::report::{ExcludedItem, Explanation, SelectedItem},
    store::TimelineEvent,
};

/// Every decision explained, oldest first.
pub fn section(t: &Thread, csrf: &str) -> Html {
    let mut h = Html::new();
    h.raw("<section id=\"decisions\"><h2>Context decisions</h2>");
    if t.decisions.is_empty() {
        h.raw("<p class=\"empty\">No context decision: no turn of this thread has started.</p>");
    }
    for e in &t.decisions {
        h.html(&one(t, e, csrf));
    }
    h.raw("</section>");
    h
}

fn one(t: &Thread, e: &Explanation, csrf: &str) -> Html {
    let mut h = Html::new();
    h.raw("<article class=\"decision\" id=\"decision-")
        .num(e.decision_id)
        .raw("\"><h3>Decision ")
        .num(e.decision_id)
        .raw(" · ")
        .text(&e.profile)
        .raw(" · request <a href=\"#msg-")
        .text(&e.message_id)
        .raw("\">")
        .text(&e.message_id)
        .raw("</a></h3><dl class=\"facts\">");
    fact(&mut h, "made", &time(e.created_at.millis()));
    fact(&mut h, "mode", &e.mode);
    fact(&mut h, "workspace", &e.workspace_mode);
    fact(&mut h, "session", &e.session_key);
    fact(&mut h, "context characters", &e.context_chars.to_string());
    fact(&mut h, "prompt characters", &e.prompt_chars.to_string());
    if let Some(turn) = &e.turn {
        let mut state = turn.state.clone();
        if let Some(err) = &turn.error {
            state.push_str(&format!(" ({err})"));
        }
        fact(&mut h, "turn", &format!("{} {state}", turn.turn_id));
        if !turn.feed_segments.is_empty() {
            let used: Vec<String> = turn
                .feed_segments
                .iter()
                .map(|s| format!("#{} ({} messages)", s.segment_id, s.items))
                .collect();
            fact(&mut h, "feed segments read", &used.join(", "));
        }
    }
    if let Some(origin) = &e.handoff {
        fact(&mut h, "handoff", &origin.summary);
    }
    h.raw("</dl>").el(
        "<p class=\"request\">Request: <q>",
        &e.request_text,
        "</q></p>",
    );
    h.html(&selected(t, &e.selected));
    h.html(&excluded(t, &e.excluded));
    details(&mut h, "Injected context", e.thread_context.as_deref());
    details(&mut h, "Prompt preview", e.prompt_preview.as_deref());
    let diagnostics = serde_json::to_string_pretty(&e.diagnostics).unwrap_or_default();
    details(&mut h, "Diagnostics", Some(&diagnostics));
    h.html(&what_if::form(&t.root_msg_id, e, csrf));
    h.raw("</article>");
    h
}

fn fact(h: &mut Html, term: &'static str, value: &str) {
    h.raw("<dt>")
        .raw(term)
        .raw("</dt>")
        .el("<dd>", value, "</dd>");
}

fn details(h: &mut Html, summary: &'static str, text: Option<&str>) {
    let Some(text) = text else {
        return;
    };
    h.raw("<details class=\"block\"><summary>")
        .raw(summary)
        .raw("</summary><pre>")
        .text(text)
        .raw("</pre></details>");
}

/// The record whose item this is.
fn record_of(t: &Thread, item_id: i64) -> Option<&TimelineEvent> {
    t.events.iter().find(|e| e.item_id == Some(item_id))
}

/// The selected items; the trimmed ones marked.
pub fn selected(t: &Thread, items: &[SelectedItem]) -> Html {
    let mut h = Html::new();
    h.raw("<h4>Selected (")
        .num(i64::try_from(items.len()).unwrap_or(i64::MAX))
        .raw(")</h4>");
    if items.is_empty() {
        h.raw("<p class=\"empty\">Nothing was selected.</p>");
        return h;
    }
    h.raw("<table class=\"selected\"><thead><tr><th>Item</th><th>Type</th><th>Author</th>")
        .raw("<th>Characters</th><th>Preview</th></tr></thead><tbody>");
    for s in items {
        h.raw(if s.truncated {
            "<tr class=\"item selected trimmed\">"
        } else {
            "<tr class=\"item selected\">"
        });
        item_cell(&mut h, t, s.item_id);
        h.el("<td>", &s.item_type, "</td>")
            .el("<td>", &s.author_label, "</td>")
            .el("<td>", &s.chars.to_string(), "");
        if s.truncated {
            h.raw(" <span class=\"badge trimmed\">trimmed</span>");
        }
        h.el("</td><td class=\"text\">", &s.preview, "</td></tr>");
    }
    h.raw("</tbody></table>");
    h
}

/// The excluded items with their reasons.
pub fn excluded(t: &Thread, items: &[ExcludedItem]) -> Html {
    let mut h = Html::new();
    h.raw("<h4>Excluded (")
        .num(i64::try_from(items.len()).unwrap_or(i64::MAX))
        .raw(")</h4>");
    if items.is_empty() {
        h.raw("<p class=\"empty\">Nothing was left out.</p>");
        return h;
    }
    h.raw("<table class=\"excluded\"><thead><tr><th>Item</th><th>Type</th><th>Reason</th>")
        .raw("<th>Message</th></tr></thead><tbody>");
    for x in items {
        h.raw("<tr class=\"item excluded\">");
        item_cell(&mut h, t, x.item_id);
        h.el("<td>", &x.item_type, "</td>")
            .el(
                "<td><span class=\"badge reason\">",
                &x.reason,
                "</span></td>",
            )
            .raw("<td class=\"text\">");
        match record_of(t, x.item_id) {
            Some(r) if r.recalled => {
                h.raw("<span class=\"badge recalled\">recalled</span>");
            }
            Some(r) => {
                h.text(&crate::context::report::preview(&r.text, 80));
            }
            None => {}
        }
        h.raw("</td></tr>");
    }
    h.raw("</tbody></table>");
    h
}

/// The item's id, linked to its message when the thread holds it.
fn item_cell(h: &mut Html, t: &Thread, item_id: i64) {
    h.raw("<td>");
    match record_of(t, item_id) {
        Some(r) if item_id != 0 => {
            h.raw("<a href=\"#msg-")
                .text(&r.message_id)
                .raw("\">")
                .num(item_id)
                .raw("</a>");
        }
        _ => {
            h.num(item_id);
        }
    }
    h.raw("</td>");
}
