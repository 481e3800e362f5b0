//! The explanation of one context decision: the JSON shape of `GET /explain/{root}` and
//! the readable report that endpoint (with `Accept: text/plain`) and the `explain` CLI
//! print.

use serde::{Deserialize, Serialize};

use super::selector::{Excluded, Selected};
use crate::util::UnixMs;

/// One selected item as explained.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SelectedItem {
    pub item_id: i64,
    /// `topic_root`, `human_message`, `agent_output`, `quoted_reply`, `topic_root_block`,
    /// `carried_summary`; media items (`item_id` 0): `image`, `text_file`, `file`,
    /// `bundle`, `doc`.
    pub item_type: String,
    pub author_label: String,
    /// Characters injected.
    pub chars: usize,
    /// The first characters.
    pub preview: String,
    /// Cut to `max_agent_output_chars` (or the quoted-reply or carried-summary budget).
    pub truncated: bool,
    /// When its message was said (Feishu's create time); none for the quoted reply and
    /// topic root blocks, and in decisions recorded before items carried it.
    #[serde(default)]
    pub created_at: Option<UnixMs>,
}

/// An excluded item as explained.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExcludedItem {
    pub item_id: i64,
    pub item_type: String,
    /// `limit`, `chars`, `own_output`, `same_turn_request`, `recalled`, `mode`,
    /// `other_profile`, `command`, `in_thread_context`, `topic_root_block`, `in_feed`;
    /// for a media item (`item_id` 0): `too_many_images`, `too_large`, `files_budget`,
    /// `too_many_docs`, `not_readable`, `fetch_failed`.
    pub reason: String,
    /// When its message was said (Feishu's create time); none in decisions recorded
    /// before items carried it.
    #[serde(default)]
    pub created_at: Option<UnixMs>,
}

impl From<&Selected> for SelectedItem {
    fn from(s: &Selected) -> Self {
        Self {
            item_id: s.item_id,
            item_type: s.item_type.to_string(),
            author_label: s.author_label.clone(),
            chars: s.text.chars().count(),
            preview: preview(&s.text, 80),
            truncated: s.truncated,
            created_at: Some(s.created_at),
        }
    }
}

impl From<Excluded> for ExcludedItem {
    fn from(e: Excluded) -> Self {
        Self {
            item_id: e.item_id,
            item_type: e.item_type.to_string(),
            reason: e.reason.to_string(),
            created_at: Some(e.created_at),
        }
    }
}

/// Where a handoff turn came from: another bot's answer, on a person's behalf.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct HandoffOrigin {
    /// `invoked by <bot>'s turn <turn_id>, requested by <person>`.
    pub summary: String,
    /// `chain_<hex>`.
    pub chain_id: String,
    /// 1 for the chain's first handoff.
    pub hop: i64,
    /// The profile whose answer handed over.
    pub from_profile: String,
    /// Its turn.
    pub parent_turn_id: String,
    /// The person who started the chain: their open_id…
    pub requested_by: String,
    /// …and their name, when known.
    pub requested_by_name: Option<String>,
    /// The profiles of the chain so far, in order.
    pub path: Vec<String>,
    /// `mention` or `field`.
    pub via: String,
}

/// What became of a decision's turn.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TurnOutcome {
    /// `turn_<hex>` (`GET /turns/{turn_id}`).
    pub turn_id: String,
    /// `queued`, `running`, `succeeded`, `failed`, `cancelled`.
    pub state: String,
    /// Why it failed or was cancelled.
    pub error: Option<String>,
    /// The posted answer.
    pub reply_message_id: Option<String>,
    /// Characters of the agent's answer.
    pub output_chars: Option<usize>,
    /// The batched-feed segments it used, oldest first.
    pub feed_segments: Vec<FeedSegmentUsed>,
    /// The questions its agent asked, in order, and who answered them when.
    pub asks: Vec<AskOutcome>,
}

/// A question a turn's agent asked, and its answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AskOutcome {
    /// The ask's id.
    pub ask_id: String,
    pub prompt: String,
    /// `open`, `answered`, `timed_out` or `closed`.
    pub state: String,
    pub answer: Option<String>,
    /// The presser's open_id (none for a timeout).
    pub answered_by: Option<String>,
    /// Unix ms.
    pub answered_at: Option<i64>,
}

/// A batched-feed segment a turn used.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FeedSegmentUsed {
    /// `GET /feed` lists it.
    pub segment_id: i64,
    /// Messages packed into it.
    pub items: i64,
}

/// One decision, explained.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Explanation {
    pub decision_id: i64,
    pub profile: String,
    /// The profile's app id.
    pub bridge_id: String,
    pub root_msg_id: String,
    /// The request message.
    pub message_id: String,
    /// `thread_context`, `pending_history`, `thread_context+pending_history`, or `none`.
    pub mode: String,
    /// `shared`, `owner_only`, or `dm`.
    pub workspace_mode: String,
    pub session_key: String,
    pub request_text: String,
    /// Characters of injected context (thread, history, topic root, quote, carried
    /// summary).
    pub context_chars: usize,
    /// Characters of the whole prompt.
    pub prompt_chars: usize,
    /// Selected items: the quoted reply, carried summary and topic root blocks, then the
    /// thread, then the pending history, each oldest said first.
    pub selected: Vec<SelectedItem>,
    /// Excluded items with reasons.
    pub excluded: Vec<ExcludedItem>,
    /// Counts, budgets, which budget cut, topic-root and quote handling.
    pub diagnostics: serde_json::Value,
    pub created_at: UnixMs,
    /// What became of the turn that made this decision (absent for decisions recorded
    /// before turns were persisted).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub turn: Option<TurnOutcome>,
    /// Where the turn came from when another bot's answer handed it over.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub handoff: Option<HandoffOrigin>,
    /// The injected context as rendered (`verbose`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub thread_context: Option<String>,
    /// The prompt as submitted (`verbose`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prompt_preview: Option<String>,
}

/// A preview of at most `n` characters, on one line.
pub fn preview(text: &str, n: usize) -> String {
    let flat: String = text
        .chars()
        .map(|c| if c == '\n' || c == '\r' { ' ' } else { c })
        .collect();
    if flat.chars().count() <= n {
        flat
    } else {
        let mut p: String = flat.chars().take(n.saturating_sub(1)).collect();
        p.push('…');
        p
    }
}

/// The readable report.
pub fn render_text(e: &Explanation) -> String {
    let mut out = String::new();
    write_header(&mut out, e);
    if let Some(h) = &e.handoff {
        line(
            &mut out,
            &format!(
                "handoff      {} (chain {}, hop {})",
                h.summary, h.chain_id, h.hop
            ),
        );
    }
    write_items(&mut out, e);
    write_diagnostics(&mut out, &e.diagnostics);
    if let Some(t) = &e.turn {
        write_turn(&mut out, t);
    }
    for (title, text) in [
        ("thread context:", &e.thread_context),
        ("prompt preview:", &e.prompt_preview),
    ] {
        if let Some(text) = text {
            line(&mut out, "");
            line(&mut out, title);
            line(&mut out, text);
        }
    }
    out
}

/// Appends `s` and a newline.
fn line(out: &mut String, s: &str) {
    out.push_str(s);
    out.push('\n');
}

/// Which decision, for which message and session, and its sizes.
fn write_header(out: &mut String, e: &Explanation) {
    line(out, &format!("decision     {}", e.decision_id));
    line(
        out,
        &format!("profile      {} (bridge {})", e.profile, e.bridge_id),
    );
    line(out, &format!("root_msg_id  {}", e.root_msg_id));
    line(out, &format!("message_id   {}", e.message_id));
    line(
        out,
        &format!("mode         {} ({})", e.mode, e.workspace_mode),
    );
    line(out, &format!("session      {}", e.session_key));
    line(
        out,
        &format!("request      {}", preview(&e.request_text, 100)),
    );
    line(
        out,
        &format!(
            "context      {} chars    prompt {} chars",
            e.context_chars, e.prompt_chars
        ),
    );
    line(out, "");
}

/// The selected items as a table, then the excluded ones with their reasons.
fn write_items(out: &mut String, e: &Explanation) {
    line(out, &format!("selected ({})", e.selected.len()));
    if !e.selected.is_empty() {
        line(
            out,
            &format!(
                "  {:<8} {:<16} {:<24} {:>6}  {}",
                "item", "type", "source", "chars", "preview"
            ),
        );
        for s in &e.selected {
            let mark = if s.truncated { " [truncated]" } else { "" };
            line(
                out,
                &format!(
                    "  {:<8} {:<16} {:<24} {:>6}  {}{mark}",
                    s.item_id,
                    s.item_type,
                    preview(&s.author_label, 24),
                    s.chars,
                    preview(&s.preview, 60)
                ),
            );
        }
    }
    line(out, &format!("excluded ({})", e.excluded.len()));
    for x in &e.excluded {
        line(
            out,
            &format!("  {:<8} {:<16} {}", x.item_id, x.item_type, x.reason),
        );
    }
}

/// The thread's counts and budgets, and how the topic root and quoted reply were used.
fn write_diagnostics(out: &mut String, d: &serde_json::Value) {
    line(
        out,
        &format!(
            "diagnostics  candidates={} eligible={} selected={} chars {}→{} limit={} max_chars={} cut_by={}",
            d["thread"]["candidates"],
            d["thread"]["eligible"],
            d["thread"]["selected"],
            d["thread"]["chars_before"],
            d["thread"]["chars_after"],
            d["thread"]["limit"],
            d["thread"]["max_chars"],
            d["thread"]["cut_by"].as_str().unwrap_or("-")
        ),
    );
    line(
        out,
        &format!(
            "topic root   {}    quoted reply {}",
            d["topic_root"].as_str().unwrap_or("-"),
            d["quoted_reply"].as_str().unwrap_or("-")
        ),
    );
    // What the turn's messages carried, when it fetched any.
    let media = &d["media"];
    if media.is_object() {
        line(
            out,
            &format!(
                "media        images={} text_files={} files={} bundles={} docs={} chars={} skipped={}",
                media["images"],
                media["text_files"],
                media["files"],
                media["bundles"],
                media["docs"],
                media["chars"],
                media["skipped"].as_array().map_or(0, Vec::len)
            ),
        );
        for s in media["skipped"].as_array().into_iter().flatten() {
            line(
                out,
                &format!(
                    "  skipped    {} {}: {} ({})",
                    s["item_type"].as_str().unwrap_or("-"),
                    preview(s["label"].as_str().unwrap_or("-"), 40),
                    s["reason"].as_str().unwrap_or("-"),
                    preview(s["detail"].as_str().unwrap_or(""), 80)
                ),
            );
        }
    }
    // The daily digest's summary, when the session had one to carry.
    let carried = &d["carried_summary"];
    if let (Some(status), Some(id)) = (carried["status"].as_str(), carried["digest_id"].as_i64()) {
        line(
            out,
            &format!(
                "carried      {status} digest {id} chars {}→{} max_chars={}",
                carried["chars_before"], carried["chars_after"], carried["max_chars"]
            ),
        );
    }
}

/// What became of the decision's turn, and the feed segments it used.
fn write_turn(out: &mut String, t: &TurnOutcome) {
    let detail = match (&t.error, &t.reply_message_id, t.output_chars) {
        (Some(error), _, _) => format!(": {error}"),
        (None, Some(reply), Some(chars)) => {
            format!(", answer of {chars} chars posted as {reply}")
        }
        _ => String::new(),
    };
    line(
        out,
        &format!("turn         {} {}{detail}", t.turn_id, t.state),
    );
    if !t.feed_segments.is_empty() {
        let each: Vec<String> = t
            .feed_segments
            .iter()
            .map(|s| format!("#{} ({} messages)", s.segment_id, s.items))
            .collect();
        line(
            out,
            &format!(
                "feed         {} segment(s) used: {}",
                t.feed_segments.len(),
                each.join(", ")
            ),
        );
    }
    for a in &t.asks {
        let by = match (&a.answered_by, a.state.as_str()) {
            (Some(by), _) => format!(" by {by}"),
            (None, "timed_out") => " by its timeout".into(),
            _ => String::new(),
        };
        let at = a
            .answered_at
            .map(|t| format!(" at {t}"))
            .unwrap_or_default();
        let answer = a
            .answer
            .as_deref()
            .map(|v| format!(": {v}"))
            .unwrap_or_default();
        line(
            out,
            &format!("ask          {} {}{answer}{by}{at}", a.ask_id, a.state),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn items_of_decisions_recorded_before_they_carried_a_time_still_read() {
        let old = r#"[{"item_id":1,"item_type":"human_message","author_label":"A","chars":1,
                      "preview":"a","truncated":false}]"#;
        let items: Vec<SelectedItem> = serde_json::from_str(old).expect("reads");
        assert_eq!(items[0].created_at, None);
        let old = r#"[{"item_id":2,"item_type":"agent_output","reason":"own_output"}]"#;
        let items: Vec<ExcludedItem> = serde_json::from_str(old).expect("reads");
        assert_eq!(items[0].created_at, None);
    }

    #[test]
    fn previews_are_one_line_and_bounded() {
        assert_eq!(preview("a\nb", 10), "a b");
        assert_eq!(preview("abcdef", 4), "abc…");
    }
}
