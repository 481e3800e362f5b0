//! Fitting text into Feishu's size limits, which are counted in bytes of request JSON:
//! a card (or a `post`) may take 30 KB, a text message 150 KB. A card's markdown sits in
//! a JSON string (the card) inside a JSON string (the request's `content`), so each
//! character costs what it costs escaped twice: 3 bytes for a Chinese character, 4 for a
//! quote, 3 for a newline. 8,000 characters of Chinese with some markdown are past 30 KB.

/// The most bytes of request JSON the bridge lets one card take: Feishu's 30 KB, less a
/// margin for what the request wraps around it.
pub const CARD_REQUEST_MAX: usize = 25 * 1024;

/// Largest text sent in one text message, in characters. Feishu allows 150 KB of text
/// request; at most 7 bytes a character even escaped twice, 8,000 characters stay far
/// below it and readable.
pub const MAX_MESSAGE_CHARS: usize = 8_000;

/// What the bridge adds around a card's own JSON in any request that carries it (the
/// member names, `msg_type`, `uuid`, `sequence`, `reply_in_thread`, …).
const REQUEST_WRAPPING: usize = 256;

/// Bytes one character takes written into a JSON string once.
fn escaped_once(c: char) -> usize {
    match c {
        '"' | '\\' | '\n' | '\r' | '\t' | '\u{8}' | '\u{c}' => 2,
        c if (c as u32) < 0x20 => 6,
        c => c.len_utf8(),
    }
}

/// Bytes one character takes written into a JSON string that is itself written into a
/// JSON string: each backslash and quote of the first escaping is escaped again.
fn escaped_twice(c: char) -> usize {
    match c {
        '"' | '\\' => 4,
        '\n' | '\r' | '\t' | '\u{8}' | '\u{c}' => 3,
        c if (c as u32) < 0x20 => 7,
        c => c.len_utf8(),
    }
}

/// Bytes `text` adds to a request as a card's text (escaped twice).
pub fn card_text_bytes(text: &str) -> usize {
    text.chars().map(escaped_twice).sum()
}

/// Bytes `text` adds to a request as a plain JSON string (escaped once).
pub fn plain_text_bytes(text: &str) -> usize {
    text.chars().map(escaped_once).sum()
}

/// Bytes a request carrying `card` takes, at most (the card as a JSON string, plus
/// what any request wraps around it).
pub fn card_request_bytes(card: &serde_json::Value) -> usize {
    plain_text_bytes(&card.to_string()) + 2 + REQUEST_WRAPPING
}

/// How many bytes of text fit in a card whose JSON without the text is `empty`.
pub fn card_text_room(empty: &serde_json::Value) -> usize {
    CARD_REQUEST_MAX.saturating_sub(card_request_bytes(empty))
}

/// Splits `text` into parts that cost at most `max` each by `cost` (a sum over
/// characters), at paragraph, line or word boundaries, never inside a fenced code block
/// unless the block alone is too long (then the fence is closed and reopened around the
/// cut).
pub fn split(text: &str, max: usize, cost: fn(&str) -> usize) -> Vec<String> {
    if cost(text) <= max {
        return vec![text.to_string()];
    }
    // A reopened fence and a closing one must fit beside some text.
    let mut parts = Parts {
        max: max.max(32),
        cost,
        done: Vec::new(),
        current: String::new(),
        current_cost: 0,
    };
    let closing = cost("```\n");
    let mut fence: Option<String> = None;
    for line in text.split_inclusive('\n') {
        let trimmed = line.trim_start();
        let toggles = trimmed.starts_with("```");
        let line_cost = cost(line);
        let reserve = if fence.is_some() { closing } else { 0 };
        if !parts.fits(line_cost + reserve) && !parts.current.is_empty() {
            match &fence {
                Some(f) => {
                    parts.push("```\n");
                    parts.cut();
                    parts.push(f);
                }
                None => parts.cut(),
            }
        }
        if parts.fits(line_cost + reserve) {
            parts.push(line);
        } else {
            // One very long line: cut at word boundaries, then inside words.
            for word in line.split_inclusive(' ') {
                let word_cost = cost(word);
                if !parts.fits(word_cost) && !parts.current.is_empty() {
                    parts.cut();
                }
                if parts.fits(word_cost) {
                    parts.push(word);
                } else {
                    for c in word.chars() {
                        let mut buf = [0u8; 4];
                        let one: &str = c.encode_utf8(&mut buf);
                        if !parts.fits(cost(one)) {
                            parts.cut();
                        }
                        parts.push(one);
                    }
                }
            }
        }
        if toggles {
            fence = match fence {
                Some(_) => None,
                None => Some(format!("{}\n", trimmed.trim_end())),
            };
        }
    }
    parts.cut();
    parts
        .done
        .into_iter()
        .map(|p| p.trim_end_matches('\n').to_string())
        .filter(|p| !p.is_empty())
        .collect()
}

/// Parts being cut, with the cost of the one being filled.
struct Parts {
    max: usize,
    cost: fn(&str) -> usize,
    done: Vec<String>,
    current: String,
    current_cost: usize,
}

impl Parts {
    fn fits(&self, more: usize) -> bool {
        self.current_cost + more <= self.max
    }

    fn push(&mut self, s: &str) {
        self.current.push_str(s);
        self.current_cost += (self.cost)(s);
    }

    fn cut(&mut self) {
        if !self.current.is_empty() {
            self.done.push(std::mem::take(&mut self.current));
        }
        self.current_cost = 0;
    }
}

/// Characters, as a cost.
pub fn chars(text: &str) -> usize {
    text.chars().count()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn the_cost_of_text_is_what_it_adds_to_the_request() {
        for text in [
            "plain",
            "中文字符",
            "quote \" and \\ backslash",
            "lines\nand\ttabs\u{1}",
        ] {
            let card = json!({"md": text});
            let empty = json!({"md": ""});
            let request = |c: &serde_json::Value| json!({"content": c.to_string()}).to_string();
            assert_eq!(
                card_text_bytes(text),
                request(&card).len() - request(&empty).len(),
                "{text:?}"
            );
            assert_eq!(
                plain_text_bytes(text),
                json!({"t": text}).to_string().len() - json!({"t": ""}).to_string().len()
            );
        }
    }

    #[test]
    fn eight_thousand_chinese_characters_with_markdown_do_not_fit_one_card() {
        // 8,000 Chinese characters in a bold list.
        let text = "- **中文的回答内容很长啊**\n".repeat(800);
        assert_eq!(text.chars().filter(|c| !c.is_ascii()).count(), 8_000);
        assert!(card_text_bytes(&text) > 30 * 1024);
        let parts = split(&text, CARD_REQUEST_MAX - 1024, card_text_bytes);
        assert!(parts.len() >= 2, "{}", parts.len());
        for p in &parts {
            assert!(card_text_bytes(p) <= CARD_REQUEST_MAX - 1024);
        }
        assert_eq!(parts.concat().replace('\n', ""), text.replace('\n', ""));
    }

    #[test]
    fn short_text_is_one_part() {
        assert_eq!(split("hello", 10, chars), ["hello"]);
    }

    #[test]
    fn splits_at_lines_and_words() {
        let parts = split(
            &format!("{}\n{}", "a".repeat(30), "b".repeat(30)),
            32,
            chars,
        );
        assert_eq!(parts, ["a".repeat(30), "b".repeat(30)]);
        let parts = split(&"word ".repeat(20), 32, chars);
        assert!(parts.iter().all(|p| p.chars().count() <= 32), "{parts:?}");
        assert_eq!(parts.concat().replace(' ', ""), "word".repeat(20));
    }

    #[test]
    fn a_word_longer_than_a_part_is_cut_inside() {
        let word = "x".repeat(100);
        let parts = split(&word, 32, chars);
        assert!(parts.iter().all(|p| p.chars().count() <= 32), "{parts:?}");
        assert_eq!(parts.concat(), word);
    }

    #[test]
    fn code_blocks_are_reopened_across_parts() {
        let text = format!("intro\n```rust\n{}```\nend", "let x = 1;\n".repeat(6));
        let parts = split(&text, 48, chars);
        assert!(parts.len() > 1);
        for p in &parts {
            assert_eq!(p.matches("```").count() % 2, 0, "balanced fences in {p:?}");
            assert!(p.chars().count() <= 48, "{p:?}");
        }
    }
}
