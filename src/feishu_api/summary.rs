//! What the chat list shows for a card. Feishu previews a card by its schema 2.0
//! `config.summary` (`{"content": "…"}`, "卡片摘要信息", card JSON 2.0 structure); without
//! one it shows a generic placeholder ("[卡片]", or "生成中" while streaming). The bridge
//! gives each card the first line of its text: plain (markdown marks dropped), on one
//! line, at most [`MAX_CHARS`] characters, and with mention tags made plain.

use serde_json::{Value, json};

use super::defuse;

/// The longest summary, in characters (a chat list shows about this much).
pub const MAX_CHARS: usize = 60;

/// The most bytes a summary adds to a card request beyond an empty card's: its
/// characters escaped twice, at most 7 bytes each. Card builders keep this much room.
pub const RESERVE: usize = MAX_CHARS * 7;

/// `config.summary` for a card whose text is `text`; `fallback` when it has no line to
/// show.
pub fn of(text: &str, fallback: &str) -> Value {
    json!({ "content": first_line(text).unwrap_or_else(|| fallback.to_string()) })
}

/// The first line of `text` that says something, as a summary: markdown marks dropped,
/// trimmed, bounded, mention tags plain. `None` when no line has any text.
pub fn first_line(text: &str) -> Option<String> {
    let line = text.lines().map(plain).find(|l| !l.is_empty())?;
    let bounded = if line.chars().count() > MAX_CHARS {
        let cut: String = line.chars().take(MAX_CHARS - 1).collect();
        format!("{}…", cut.trim_end())
    } else {
        line
    };
    Some(defuse::mentions(&bounded).into_owned())
}

/// One markdown line as plain text: no heading, quote or list mark in front, no
/// emphasis or code marks, whitespace collapsed.
fn plain(line: &str) -> String {
    let mut rest = line.trim();
    loop {
        let before = rest;
        rest = rest.trim_start_matches(['#', '>']).trim_start();
        for mark in ["- ", "* ", "+ "] {
            rest = rest.strip_prefix(mark).unwrap_or(rest);
        }
        let digits = rest.chars().take_while(char::is_ascii_digit).count();
        if digits > 0 && rest[digits..].starts_with(". ") {
            rest = &rest[digits + 2..];
        }
        if rest == before {
            break;
        }
    }
    let unmarked = rest.replace("**", "").replace("__", "").replace('`', "");
    unmarked.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_summary_is_the_first_line_with_text_plain_and_bounded() {
        assert_eq!(
            first_line("\n\n## **方案** 一\n- 第一步").as_deref(),
            Some("方案 一")
        );
        assert_eq!(first_line("> 1. `run` it\nmore").as_deref(), Some("run it"));
        assert_eq!(first_line("  \n ** \n"), None);
        let long = "字".repeat(200);
        let cut = first_line(&long).unwrap_or_default();
        assert_eq!(cut.chars().count(), MAX_CHARS);
        assert!(cut.ends_with('…'));
        assert_eq!(of("", "Working…"), json!({"content": "Working…"}));
    }

    #[test]
    fn a_summary_pings_nobody() {
        let said = first_line("<at id=all></at> look <at user_id=\"ou_x\">x</at>");
        let said = said.unwrap_or_default();
        assert!(!said.contains("<at") && !said.contains("</at"), "{said}");
        assert!(said.contains("look"), "{said}");
    }
}
