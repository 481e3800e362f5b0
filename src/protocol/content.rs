//! Message content to plain text.
//!
//! * `text`: `{"text":"@_user_1 hi"}`; each `@_user_N` is resolved through the event's
//!   `mentions[].key`.
//! * `post`: received un-wrapped (`{"title","content":[[…]]}`) but sent locale-wrapped
//!   (`{"zh_cn":{…}}`); both are read. Paragraphs become lines; links `[text](href)`;
//!   code blocks fenced; `@` tags resolved like mentions.
//! * Everything else becomes a short placeholder (`[image]`, `[file: a.pdf]`, …): never
//!   dropped silently.
//!
//! This bot's own mention is removed (it is routing information, not request text);
//! other mentions stay as `@Name`; a Feishu key such as `@_user_1` never survives.
//! `@all` is kept as text but never counts as mentioning this bot.

use serde_json::Value;

use super::events::Mention;

/// What a message says, for routing and for the event log.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Normalized {
    /// Plain text, mentions resolved, this bot's mention removed.
    pub text: String,
    /// The message @-mentions this bot (explicitly; `@all` does not count).
    pub mentions_bot: bool,
    /// The message @-mentions everyone.
    pub mentions_all: bool,
    /// The text is a placeholder for non-text content.
    pub placeholder: bool,
    /// Display names learned from the mentions: `(open_id, name)`.
    pub names: Vec<(String, String)>,
    /// What the message carries besides text (images, a file, a bundle, doc links).
    pub media: Vec<super::media::MediaRef>,
}

const ALL_KEYS: [&str; 2] = ["@_all", "all"];

/// Normalizes a message's content. `bot_open_id` is this profile's own bot.
pub fn normalize(
    message_type: &str,
    content: &str,
    mentions: &[Mention],
    bot_open_id: Option<&str>,
) -> Normalized {
    let value: Value = serde_json::from_str(content).unwrap_or(Value::Null);
    let resolver = Resolver {
        mentions,
        bot_open_id,
    };
    let mut out = Normalized {
        names: mentions
            .iter()
            .filter_map(|m| Some((m.id.open_id.clone()?, m.name.clone())))
            .filter(|(id, name)| !id.is_empty() && !name.is_empty())
            .collect(),
        ..Normalized::default()
    };
    let text = match message_type {
        "text" => {
            let raw = value["text"].as_str().unwrap_or_default();
            resolver.text(raw, &mut out)
        }
        "post" => post_text(&value, &resolver, &mut out),
        other => {
            out.placeholder = true;
            placeholder(other, &value)
        }
    };
    out.media = super::media::refs_in(message_type, &value);
    // U+0000 is invisible, and Postgres text cannot hold it: gone on both backends.
    out.text = tidy(&text.replace('\0', ""));
    out
}

struct Resolver<'a> {
    mentions: &'a [Mention],
    bot_open_id: Option<&'a str>,
}

impl Resolver<'_> {
    fn is_bot(&self, m: &Mention) -> bool {
        self.bot_open_id
            .is_some_and(|bot| m.id.open_id.as_deref() == Some(bot))
    }

    /// The text to put where a mention key stood, noting what it mentioned.
    fn resolve(&self, key: &str, fallback_name: Option<&str>, out: &mut Normalized) -> String {
        if ALL_KEYS.contains(&key) {
            out.mentions_all = true;
            return "@all".into();
        }
        match self.mentions.iter().find(|m| m.key == key) {
            Some(m) if self.is_bot(m) => {
                out.mentions_bot = true;
                String::new()
            }
            Some(m) if !m.name.is_empty() => format!("@{}", m.name),
            _ => match fallback_name {
                Some(n) if !n.is_empty() => format!("@{n}"),
                _ => "@someone".into(),
            },
        }
    }

    /// Replaces every `@_user_N` / `@_all` key in `raw`. U+0000 is dropped first: dropped
    /// after, it could join an `@` and a `_` into a key that was never resolved.
    fn text(&self, raw: &str, out: &mut Normalized) -> String {
        let raw = raw.replace('\0', "");
        let mut result = String::with_capacity(raw.len());
        let mut rest = raw.as_str();
        while let Some(pos) = rest.find("@_") {
            result.push_str(&rest[..pos]);
            let after = &rest[pos..];
            let end = after[2..]
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .map_or(after.len(), |i| i + 2);
            let key = &after[..end];
            result.push_str(&self.resolve(key, None, out));
            rest = &after[end..];
        }
        result.push_str(rest);
        result
    }
}

fn post_text(value: &Value, resolver: &Resolver<'_>, out: &mut Normalized) -> String {
    // Received posts are bare; sent ones are wrapped in a locale.
    let body = if value.get("content").is_some() {
        value
    } else {
        ["zh_cn", "en_us", "ja_jp"]
            .iter()
            .find_map(|l| value.get(*l))
            .or_else(|| {
                value
                    .as_object()
                    .and_then(|o| o.values().find(|v| v.get("content").is_some()))
            })
            .unwrap_or(&Value::Null)
    };
    let mut lines = Vec::new();
    if let Some(title) = body["title"].as_str().filter(|t| !t.trim().is_empty()) {
        lines.push(title.trim().to_string());
    }
    for paragraph in body["content"].as_array().into_iter().flatten() {
        let mut line = String::new();
        for el in paragraph.as_array().into_iter().flatten() {
            line.push_str(&element(el, resolver, out));
        }
        // A code block alone in its paragraph needs no blank lines around it.
        lines.push(line.trim_matches('\n').to_string());
    }
    lines.join("\n")
}

fn element(el: &Value, resolver: &Resolver<'_>, out: &mut Normalized) -> String {
    let s = |k: &str| el[k].as_str().unwrap_or_default();
    match s("tag") {
        "text" => resolver.text(s("text"), out),
        "a" => {
            let (text, href) = (s("text"), s("href"));
            if text.is_empty() || text == href {
                href.to_string()
            } else {
                format!("[{text}]({href})")
            }
        }
        "at" => resolver.resolve(s("user_id"), Some(s("user_name")), out),
        "img" => "[image]".into(),
        "media" => "[video]".into(),
        "emotion" => format!(":{}:", s("emoji_type")),
        "code_block" => format!(
            "\n```{}\n{}\n```\n",
            s("language").to_lowercase(),
            s("text").trim_end()
        ),
        "hr" => "---".into(),
        "md" => resolver.text(s("text"), out),
        other if !other.is_empty() => format!("[{other}]"),
        _ => String::new(),
    }
}

fn placeholder(message_type: &str, value: &Value) -> String {
    let name = |k: &str| value[k].as_str().filter(|s| !s.is_empty());
    match message_type {
        "image" => "[image]".into(),
        "file" => name("file_name").map_or("[file]".into(), |n| format!("[file: {n}]")),
        "audio" => "[audio]".into(),
        "media" => name("file_name").map_or("[video]".into(), |n| format!("[video: {n}]")),
        "sticker" => "[sticker]".into(),
        "interactive" => name("title").map_or("[card]".into(), |t| format!("[card: {t}]")),
        "share_chat" => "[shared chat]".into(),
        "share_user" => "[shared contact]".into(),
        "merge_forward" => "[forwarded messages]".into(),
        "location" => "[location]".into(),
        "system" => "[system message]".into(),
        other => format!("[{other}]"),
    }
}

/// Collapses the double spaces a removed mention leaves and trims each line, keeping
/// code blocks as they are.
fn tidy(text: &str) -> String {
    let mut lines = Vec::new();
    let mut in_code = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            in_code = !in_code;
            lines.push(line.trim().to_string());
            continue;
        }
        if in_code {
            lines.push(line.to_string());
        } else {
            lines.push(line.split_whitespace().collect::<Vec<_>>().join(" "));
        }
    }
    let joined = lines.join("\n");
    joined.trim_matches('\n').trim().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::events::UserIds;

    fn mention(key: &str, open_id: &str, name: &str) -> Mention {
        Mention {
            key: key.into(),
            id: UserIds {
                open_id: Some(open_id.into()),
                union_id: None,
                user_id: None,
            },
            name: name.into(),
            mentioned_type: None,
        }
    }

    fn mentions() -> Vec<Mention> {
        vec![
            mention("@_user_1", "ou_bot", "Planner"),
            mention("@_user_2", "ou_alice", "Alice 的 Planner"),
        ]
    }

    #[test]
    fn text_removes_own_mention_and_names_others() {
        let n = normalize(
            "text",
            r#"{"text":"@_user_1 ask @_user_2 about it"}"#,
            &mentions(),
            Some("ou_bot"),
        );
        assert_eq!(n.text, "ask @Alice 的 Planner about it");
        assert!(n.mentions_bot && !n.mentions_all);
        assert!(!n.text.contains("@_user"));
    }

    #[test]
    fn at_all_never_counts_as_mentioning_this_bot() {
        let n = normalize(
            "text",
            r#"{"text":"@_all standup in 5"}"#,
            &mentions(),
            Some("ou_bot"),
        );
        assert_eq!(n.text, "@all standup in 5");
        assert!(n.mentions_all && !n.mentions_bot);
    }

    #[test]
    fn a_nul_cannot_hide_a_mention_key() {
        let n = normalize(
            "text",
            r#"{"text":"@\u0000_user_1 hi @_user\u0000_2"}"#,
            &mentions(),
            Some("ou_bot"),
        );
        assert_eq!(n.text, "hi @Alice 的 Planner");
        assert!(n.mentions_bot);
    }

    #[test]
    fn unknown_bot_identity_never_detects_a_mention() {
        let n = normalize("text", r#"{"text":"@_user_1 hi"}"#, &mentions(), None);
        assert!(!n.mentions_bot);
        assert_eq!(n.text, "@Planner hi");
    }

    #[test]
    fn received_post_with_links_code_and_at() {
        let content = r#"{"title":"Plan","content":[[{"tag":"at","user_id":"@_user_1","user_name":"Planner"},{"tag":"text","text":" see "},{"tag":"a","text":"doc","href":"https://x.y"}],[{"tag":"code_block","language":"RUST","text":"fn main() {}\n"}],[{"tag":"img","image_key":"k"}]]}"#;
        let n = normalize("post", content, &mentions(), Some("ou_bot"));
        assert_eq!(
            n.text,
            "Plan\nsee [doc](https://x.y)\n```rust\nfn main() {}\n```\n[image]"
        );
        assert!(n.mentions_bot);
    }

    #[test]
    fn locale_wrapped_post_is_read_too() {
        let content = r#"{"zh_cn":{"title":"","content":[[{"tag":"text","text":"你好 "},{"tag":"at","user_id":"@_user_2","user_name":"Alice"}]]}}"#;
        let n = normalize("post", content, &mentions(), Some("ou_bot"));
        assert_eq!(n.text, "你好 @Alice 的 Planner");
    }

    #[test]
    fn other_types_become_placeholders() {
        assert_eq!(
            normalize("image", r#"{"image_key":"x"}"#, &[], None).text,
            "[image]"
        );
        assert_eq!(
            normalize("file", r#"{"file_key":"x","file_name":"a.pdf"}"#, &[], None).text,
            "[file: a.pdf]"
        );
        assert_eq!(normalize("audio", "{}", &[], None).text, "[audio]");
        assert_eq!(normalize("sticker", "{}", &[], None).text, "[sticker]");
        assert_eq!(
            normalize("interactive", r#"{"title":"Deploy?"}"#, &[], None).text,
            "[card: Deploy?]"
        );
        assert!(normalize("image", "{}", &[], None).placeholder);
    }
}
