//! The thread page's messages (with every profile's verdict) and turns.

use super::{
    super::html::{Html, time},
    records::Thread,
};
use crate::store::TimelineEvent;

/// The messages in said order, one row each, with the records and verdicts of each
/// profile.
pub fn messages(t: &Thread) -> Html {
    let mut h = Html::new();
    h.raw("<section id=\"messages\"><h2>Messages</h2>")
        .raw("<table class=\"messages\"><thead><tr><th>Said</th><th>Message</th>")
        .raw("<th>From</th><th>Text</th><th>Recorded as</th><th>Verdicts</th>")
        .raw("</tr></thead><tbody>");
    let mut seen: Vec<&str> = Vec::new();
    for e in &t.events {
        if seen.contains(&e.message_id.as_str()) {
            continue;
        }
        seen.push(&e.message_id);
        let records: Vec<&TimelineEvent> = t
            .events
            .iter()
            .filter(|r| r.message_id == e.message_id)
            .collect();
        message_row(&mut h, t, &records);
    }
    h.raw("</tbody></table></section>");
    h
}

fn message_row(h: &mut Html, t: &Thread, records: &[&TimelineEvent]) {
    let Some(first) = records.first() else {
        return;
    };
    let recalled = records.iter().any(|r| r.recalled);
    let text = records
        .iter()
        .map(|r| r.text.as_str())
        .find(|s| !s.is_empty())
        .unwrap_or_default();
    let from = records
        .iter()
        .find_map(|r| r.author_label.as_deref())
        .unwrap_or(&first.actor_id);
    h.raw("<tr class=\"message")
        .raw(if recalled { " recalled" } else { "" })
        .raw("\" id=\"msg-")
        .text(&first.message_id)
        .raw("\">")
        .el(
            "<td class=\"time\">",
            &time(first.created_at.millis()),
            "</td>",
        )
        .el("<td><code>", &first.message_id, "</code></td>")
        .raw("<td>")
        .text(from)
        .el(" <span class=\"actor\">", &first.actor_type, "</span></td>");
    if recalled {
        h.raw("<td class=\"text\"><span class=\"badge recalled\">recalled</span>")
            .raw(" its text was removed</td>");
    } else {
        h.el("<td class=\"text\">", text, "</td>");
    }
    h.raw("<td class=\"records\">");
    for r in records {
        h.raw("<div>")
            .text(&r.bot_profile)
            .raw(": ")
            .text(&r.event_type)
            .raw("</div>");
    }
    h.raw("</td><td class=\"verdicts\">");
    for v in t
        .verdicts
        .iter()
        .filter(|v| v.message_id == first.message_id)
    {
        let verdict = v.verdict.to_string();
        h.raw("<div class=\"verdict\"><span class=\"badge ")
            .text(&verdict)
            .raw("\">")
            .text(&verdict)
            .raw("</span> ")
            .text(&v.profile)
            .raw(": <span class=\"reason\">")
            .text(&v.reason.to_string())
            .raw("</span>");
        if let Some(id) = v.decision_id {
            h.raw(" <a href=\"#decision-")
                .num(id)
                .raw("\">decision ")
                .num(id)
                .raw("</a>");
        }
        h.raw("</div>");
    }
    h.raw("</td></tr>");
}

/// The turns, in queue order.
pub fn turns(t: &Thread) -> Html {
    let mut h = Html::new();
    h.raw("<section id=\"turns\"><h2>Turns</h2>");
    if t.turns.is_empty() {
        h.raw("<p class=\"empty\">No turn: nothing in this thread invoked an agent.</p>");
    } else {
        h.raw("<table class=\"turns\"><thead><tr><th>Turn</th><th>Profile</th>")
            .raw("<th>Request</th><th>State</th><th>Queued</th><th>Finished</th>")
            .raw("<th>Decision</th><th>Answer</th></tr></thead><tbody>");
        for turn in &t.turns {
            let state = turn.state.to_string();
            h.raw("<tr class=\"turn\">")
                .el("<td><code>", &turn.turn_id, "</code></td>")
                .el("<td>", &turn.profile, "</td>")
                .raw("<td><a href=\"#msg-")
                .text(&turn.message_id)
                .raw("\">")
                .text(&turn.message_id)
                .raw("</a></td><td><span class=\"badge state ")
                .text(&state)
                .raw("\">")
                .text(&state)
                .raw("</span>");
            if let Some(e) = &turn.error {
                h.el(" <span class=\"error\">", e, "</span>");
            }
            h.el("</td><td>", &time(turn.queued_at.millis()), "</td>")
                .el(
                    "<td>",
                    &turn
                        .finished_at
                        .map(|f| time(f.millis()))
                        .unwrap_or_default(),
                    "</td>",
                )
                .raw("<td>");
            if let Some(id) = turn.decision_id {
                h.raw("<a href=\"#decision-")
                    .num(id)
                    .raw("\">")
                    .num(id)
                    .raw("</a>");
            }
            h.raw("</td><td>");
            if let Some(out) = &turn.output {
                h.raw("<details><summary>")
                    .num(i64::try_from(out.chars().count()).unwrap_or(i64::MAX))
                    .raw(" characters</summary><pre>")
                    .text(out)
                    .raw("</pre></details>");
            }
            h.raw("</td></tr>");
        }
        h.raw("</tbody></table>");
    }
    h.raw("</section>");
    h
}
