//! The thread page's batched feed (per session: its segments and their messages) and
//! the digests of its sessions.

use super::{
    super::html::{Html, time},
    records::Thread,
};

/// Feed segments, then digests.
pub fn section(t: &Thread) -> Html {
    let mut h = Html::new();
    h.raw("<section id=\"feed\"><h2>Batched feed</h2>");
    if t.feeds.is_empty() {
        h.raw("<p class=\"empty\">No feed segment in this thread's sessions.</p>");
    }
    for f in &t.feeds {
        h.raw("<h3>")
            .text(&f.profile)
            .raw(" · <code>")
            .text(&f.session_key)
            .raw("</code></h3>");
        for (s, items) in &f.segments {
            h.raw("<div class=\"segment\" id=\"segment-")
                .num(s.id)
                .raw("\"><p>Segment ")
                .num(s.id)
                .raw(" <span class=\"badge state\">")
                .text(&s.state.to_string())
                .raw("</span> packed ")
                .text(&time(s.packed_at.millis()))
                .raw(" · ")
                .num(s.items)
                .raw(" messages, ")
                .num(s.chars)
                .raw(" characters");
            if let Some(turn) = &s.read_by_turn {
                h.raw(" · read by ").el("<code>", turn, "</code>");
            }
            h.raw("</p><ul>");
            for i in items {
                h.raw("<li>")
                    .el("<span class=\"sender\">", &i.sender, "</span>: ")
                    .text(&i.text)
                    .raw("</li>");
            }
            h.raw("</ul></div>");
        }
    }
    h.raw("</section><section id=\"digests\"><h2>Digests</h2>");
    if t.digests.is_empty() {
        h.raw("<p class=\"empty\">No digest of this thread's sessions.</p>");
    } else {
        h.raw("<table class=\"digests\"><thead><tr><th>Date</th><th>Profile</th>")
            .raw("<th>Session</th><th>Status</th><th>Messages</th><th>Summary</th>")
            .raw("</tr></thead><tbody>");
        for d in &t.digests {
            h.raw("<tr>")
                .el("<td>", &d.date, "</td>")
                .el("<td>", &d.profile, "</td>")
                .el("<td><code>", &d.session_key, "</code></td>")
                .el("<td>", &d.status.to_string(), " (")
                .text(&d.reason.to_string())
                .raw(")</td><td>")
                .num(d.messages)
                .el(
                    "</td><td class=\"text\">",
                    d.summary.as_deref().unwrap_or(""),
                    "</td></tr>",
                );
        }
        h.raw("</tbody></table>");
    }
    h.raw("</section>");
    h
}
