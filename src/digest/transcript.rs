//! A session's day as the summarizer reads it: one line per message, oldest first,
//! `[HH:MM] sender: text`, cut from the oldest end when it is too long.

use std::collections::{HashMap, HashSet};

use jiff::tz::TimeZone;

use super::schedule::clock_time;
use crate::store::ContextEventRow;

/// The most characters of a day sent to the summarizer; older lines go first.
pub const MAX_CHARS: usize = 48_000;

/// A session's day.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Transcript {
    /// What the summarizer reads.
    pub text: String,
    /// Characters of the messages themselves (what the minimum length is about).
    pub chars: usize,
    /// Messages.
    pub messages: usize,
    /// The newest record read (the next digest starts after it).
    pub last_event_id: i64,
}

impl Transcript {
    /// The day of `rows` (in said order), times in `tz`. A message recorded twice (as a
    /// topic root and as a request, say) is one line.
    pub fn of(rows: &[ContextEventRow], tz: &TimeZone) -> Self {
        Self::named(rows, tz, &HashMap::new())
    }

    /// [`Self::of`], each sender shown by its name in `names` (by open_id) when it has
    /// one.
    pub fn named(rows: &[ContextEventRow], tz: &TimeZone, names: &HashMap<String, String>) -> Self {
        let mut seen = HashSet::new();
        let mut lines = Vec::new();
        let mut chars = 0;
        for r in rows {
            if !seen.insert(r.message_id.as_str()) {
                continue;
            }
            let text = if r.text.is_empty() {
                r.item_text.as_deref().unwrap_or_default()
            } else {
                r.text.as_str()
            };
            let text = text.trim();
            if text.is_empty() {
                continue;
            }
            chars += text.chars().count();
            let who = r.author_label.as_deref().unwrap_or(&r.actor_id);
            let who = crate::names::relabel(names, who);
            let when = clock_time(r.created_at, tz);
            lines.push(format!("[{when}] {who}: {}", text.replace('\n', "\n  ")));
        }
        let messages = lines.len();
        Self {
            text: newest_within(&lines, MAX_CHARS),
            chars,
            messages,
            last_event_id: rows.iter().map(|r| r.id).max().unwrap_or_default(),
        }
    }

    /// Nothing was said.
    pub fn is_empty(&self) -> bool {
        self.messages == 0
    }
}

/// The newest lines that fit in `max` characters, oldest first; a note says what was
/// left out.
fn newest_within(lines: &[String], max: usize) -> String {
    let mut used = 0;
    let mut from = lines.len();
    while from > 0 {
        let cost = lines[from - 1].chars().count() + 1;
        if used + cost > max && from < lines.len() {
            break;
        }
        used += cost;
        from -= 1;
    }
    let mut out = String::new();
    if from > 0 {
        out.push_str(&format!("({from} earlier messages left out)\n"));
    }
    out.push_str(&lines[from..].join("\n"));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{util::UnixMs, vocab::kinds::EventType};

    fn row(id: i64, message_id: &str, who: &str, text: &str) -> ContextEventRow {
        ContextEventRow {
            id,
            chat_id: "oc_1".into(),
            root_msg_id: "om_1".into(),
            message_id: message_id.into(),
            event_type: EventType::HumanMessage,
            actor_type: "user".into(),
            actor_id: "ou_x".into(),
            bot_profile: "p".into(),
            bridge_id: "cli_x".into(),
            session_name: None,
            history_scope: "chat:oc_1".into(),
            text: text.into(),
            recalled: false,
            // 2025-12-01T09:05:00Z
            created_at: UnixMs(1_764_579_900_000),
            item_id: Some(id),
            author_label: Some(who.into()),
            item_text: Some(text.into()),
        }
    }

    #[test]
    fn one_line_per_message_with_its_sender_and_time() {
        let rows = [
            row(1, "om_1", "Alice", "lunch at noon?"),
            row(2, "om_1", "Alice", "lunch at noon?"),
            row(3, "om_2", "Bob", "yes\nat the usual place"),
            row(4, "om_3", "Bob", "   "),
        ];
        let t = Transcript::of(&rows, &TimeZone::UTC);
        assert_eq!(
            t.text,
            "[09:05] Alice: lunch at noon?\n[09:05] Bob: yes\n  at the usual place"
        );
        assert_eq!((t.messages, t.last_event_id), (2, 4));
        assert_eq!(
            t.chars,
            "lunch at noon?".len() + "yes\nat the usual place".len()
        );
        assert!(!t.is_empty());
        assert!(Transcript::of(&[], &TimeZone::UTC).is_empty());
    }

    #[test]
    fn a_long_day_keeps_its_newest_lines() {
        let lines: Vec<String> = (0..10).map(|i| format!("line {i}")).collect();
        let text = newest_within(&lines, 21);
        assert_eq!(
            text,
            "(7 earlier messages left out)\nline 7\nline 8\nline 9"
        );
        // One line longer than the cap is kept whole.
        assert_eq!(newest_within(&["x".repeat(30)], 10), "x".repeat(30));
    }
}
