//! Who the real Feishu would ping: the mention tags in what the fake accepts.
//!
//! Feishu turns `<at user_id="ou_…">Name</at>` (text, and markdown in cards and posts;
//! `<at id=…>` in cards) and `{"tag":"at","user_id":…}` (post elements) into mentions
//! that notify people ([DOC] `im-v1/message/message-content-description/create_json.md`).
//! The scan is deliberately broad, so a test asserting "nobody was pinged" is strict.

use serde_json::Value;

/// Every mention tag in `text`: `<at` (ASCII, any case) followed by whitespace, `/` or
/// `>`, taken up to and including the next `>`. An unterminated tag is taken to the end
/// of the text (the docs do not say what Feishu does with one; counting it is the
/// cautious reading).
pub fn tags_in(text: &str) -> Vec<String> {
    let bytes = text.as_bytes();
    let mut found = Vec::new();
    let mut i = 0;
    while i + 3 <= bytes.len() {
        let opens = bytes[i] == b'<' && bytes[i + 1..i + 3].eq_ignore_ascii_case(b"at");
        let follows = bytes
            .get(i + 3)
            .is_some_and(|b| b.is_ascii_whitespace() || *b == b'/' || *b == b'>');
        if opens && follows {
            // `<` and `>` are ASCII, so these are char boundaries.
            let end = text[i..].find('>').map_or(text.len(), |at| i + at + 1);
            found.push(text[i..end].to_string());
            i = end;
        } else {
            i += 1;
        }
    }
    found
}

/// The mention tags in every string of `value`, plus post `at` elements (written as
/// `<at user_id="…">`).
pub fn tags_in_json(value: &Value) -> Vec<String> {
    let mut found = Vec::new();
    walk(value, &mut found);
    found
}

fn walk(value: &Value, found: &mut Vec<String>) {
    match value {
        Value::String(s) => found.extend(tags_in(s)),
        Value::Array(items) => items.iter().for_each(|v| walk(v, found)),
        Value::Object(map) => {
            if map.get("tag").and_then(Value::as_str) == Some("at") {
                let who = map.get("user_id").and_then(Value::as_str).unwrap_or("");
                found.push(format!("<at user_id=\"{who}\">"));
            }
            map.values().for_each(|v| walk(v, found));
        }
        _ => {}
    }
}

/// The mention tags of a message or card `content` string: its JSON when it is JSON,
/// else the text itself.
pub fn tags_in_content(content: &str) -> Vec<String> {
    match serde_json::from_str::<Value>(content) {
        Ok(value) => tags_in_json(&value),
        Err(_) => tags_in(content),
    }
}
