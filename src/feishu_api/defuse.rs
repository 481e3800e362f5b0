//! Nothing the bridge sends can notify anyone. In a text message, a `post` and card
//! markdown alike, Feishu turns `<at user_id="all"></at>`, `<at id=all></at>` or
//! `<at email=…>` into a mention that pings a whole group or a person, and a `post`'s
//! `{"tag":"at"}` element does the same. An agent's answer, a provider's error text
//! quoted in a failure note, a quoted message it echoes: none may do that. So every
//! mention tag is written with a full-width `＜` (it reads the same and is no tag), and
//! an `at` element becomes plain text.
//!
//! [`body`] is applied to every Open API request body on its way out (`call.rs`), so
//! no text, however it was built, bypasses it; builders also neutralise their own text
//! first, so what they measure against Feishu's size limits is what is sent.

use serde_json::{Map, Value};

/// `text` with every `<at …>` and `</at>` tag made plain text.
pub fn mentions(text: &str) -> std::borrow::Cow<'_, str> {
    if !text.contains('<') {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    let mut rest = text;
    while let Some(at) = rest.find('<') {
        out.push_str(&rest[..at]);
        let tail = &rest[at + 1..];
        if opens_mention(tail) {
            out.push('＜');
        } else {
            out.push('<');
        }
        rest = tail;
    }
    out.push_str(rest);
    std::borrow::Cow::Owned(out)
}

/// `value` (an Open API request body) with every mention made plain: in every string,
/// in JSON carried as a string (a message's `content`, a card entity's `data`, CardKit
/// `settings`), and `at` elements.
pub fn body(mut value: Value) -> Value {
    defuse_value(&mut value);
    value
}

fn defuse_value(value: &mut Value) {
    match value {
        Value::String(text) => {
            if let Some(safe) = defuse_string(text) {
                *text = safe;
            }
        }
        Value::Array(items) => items.iter_mut().for_each(defuse_value),
        Value::Object(map) if map.get("tag").and_then(Value::as_str) == Some("at") => {
            *map = plain_at(map);
        }
        Value::Object(map) => map.values_mut().for_each(defuse_value),
        _ => {}
    }
}

/// `text` made safe, when that changes it. JSON in a string is made safe inside and
/// written again only when something in it changed.
fn defuse_string(text: &str) -> Option<String> {
    if text.trim_start().starts_with(['{', '['])
        && let Ok(inner) = serde_json::from_str::<Value>(text)
    {
        let mut safe = inner.clone();
        defuse_value(&mut safe);
        return (safe != inner).then(|| safe.to_string());
    }
    match mentions(text) {
        std::borrow::Cow::Owned(safe) => Some(safe),
        std::borrow::Cow::Borrowed(_) => None,
    }
}

/// A `post`'s `at` element as the plain text `@name`.
fn plain_at(at: &Map<String, Value>) -> Map<String, Value> {
    let name = ["user_name", "name"]
        .iter()
        .find_map(|k| at.get(*k).and_then(Value::as_str))
        .unwrap_or("someone");
    let mut text = Map::new();
    text.insert("tag".into(), Value::from("text"));
    text.insert("text".into(), Value::from(format!("@{}", mentions(name))));
    text
}

/// Whether what follows a `<` is a mention tag: `at` or `/at` (any case, any spacing
/// Feishu might tolerate before the name), then a space, `/` or `>`.
fn opens_mention(after: &str) -> bool {
    let after = after.trim_start();
    let after = after.strip_prefix('/').map_or(after, str::trim_start);
    let mut chars = after.chars();
    let (Some(a), Some(t)) = (chars.next(), chars.next()) else {
        return false;
    };
    a.eq_ignore_ascii_case(&'a')
        && t.eq_ignore_ascii_case(&'t')
        && chars
            .next()
            .is_none_or(|c| c.is_whitespace() || c == '>' || c == '/')
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn every_form_of_mention_tag_is_made_plain() {
        for tag in [
            r#"<at user_id="all">所有人</at>"#,
            "<at id=all></at>",
            "<AT id=all></AT>",
            "< at email=boss@example.com>",
            "<at\tuser_id=\"ou_1\">Boss</at>",
            "<at/>",
        ] {
            let safe = mentions(tag);
            assert!(!safe.to_ascii_lowercase().contains("<at"), "{tag} → {safe}");
            assert!(!safe.contains("</at"), "{tag} → {safe}");
            assert!(!safe.contains("< at"), "{tag} → {safe}");
            assert!(safe.contains('＜'), "{safe}");
        }
    }

    /// Every mention tag in any string of `value`, JSON in strings included.
    fn tags(value: &Value) -> usize {
        match value {
            Value::String(s) => {
                let lower = s.to_ascii_lowercase();
                lower.matches("<at").count() + lower.matches("</at").count()
            }
            Value::Array(items) => items.iter().map(tags).sum(),
            Value::Object(map) => {
                usize::from(map.get("tag") == Some(&Value::from("at")))
                    + map.values().map(tags).sum::<usize>()
            }
            _ => 0,
        }
    }

    #[test]
    fn a_request_body_carries_no_mention_anywhere() {
        let card = json!({"schema": "2.0", "config": {"summary": {"content": "<at id=all></at>"}},
            "body": {"elements": [{"tag": "markdown", "content": "hi <at user_id=\"ou_x\">x</at>"},
                {"tag": "button", "text": {"tag": "plain_text", "content": "<at id=all>"}}]}});
        let post = json!({"zh_cn": {"title": "<at id=all></at>", "content": [[
            {"tag": "at", "user_id": "all", "user_name": "所有人"},
            {"tag": "text", "text": " see <AT email=a@b.c>"}]]}});
        for sent in [
            json!({"msg_type": "interactive", "content": card.to_string(), "uuid": "u1"}),
            json!({"msg_type": "post", "content": post.to_string(), "uuid": "u2"}),
            json!({"type": "card_json", "data": card.to_string()}),
            json!({"card": {"type": "card_json", "data": card.to_string()}, "sequence": 3}),
            json!({"content": "streamed <at id=all></at>", "sequence": 4}),
            card.clone(),
        ] {
            assert!(tags(&sent) > 0, "the case has tags: {sent}");
            let safe = body(sent.clone());
            assert_eq!(tags(&safe), 0, "{safe}");
            assert_eq!(safe["uuid"], sent["uuid"]);
            assert_eq!(safe["sequence"], sent["sequence"]);
        }
        let post = body(json!({"content": post.to_string()}));
        let shown = post["content"].as_str().unwrap_or_default();
        assert!(shown.contains("@所有人"), "{shown}");
        // Nothing to change: the body goes out exactly as it was built.
        let plain = json!({"content": json!({"text": "a < b"}).to_string(), "uuid": "u3"});
        assert_eq!(body(plain.clone()), plain);
    }

    #[test]
    fn other_angle_brackets_are_left_alone() {
        for text in [
            "a < b",
            "<attention>",
            "<font color='red'>x</font>",
            "Vec<Atom>",
            "no tags",
        ] {
            assert_eq!(mentions(text), text);
        }
    }
}
