//! `protocol::content::normalize`: any content, any mentions, any message type, and the
//! invariants its documentation promises.

use feishu_bridge::protocol::{content::normalize, events::Mention};
use proptest::{collection::vec, option, prelude::*, sample::select};
use serde_json::{Value, json};

use crate::{
    json::{self, word},
    regressions,
    support::{corpus, fuzz},
};

const REGRESSIONS: &str = regressions!("content");

const BOT: &str = "ou_bot";

/// One call of `normalize`.
#[derive(Debug, Clone)]
struct Input {
    message_type: String,
    content: String,
    mentions: Vec<Value>,
    bot_open_id: Option<String>,
}

impl Input {
    fn mentions(&self) -> Vec<Mention> {
        self.mentions
            .iter()
            .filter_map(|m| serde_json::from_value(m.clone()).ok())
            .collect()
    }
}

/// Text with mention keys, NULs, odd whitespace, fences and `@`/`_` in every position.
fn rich_text() -> impl Strategy<Value = String> {
    let piece = prop_oneof![
        select(vec![
            "@_user_1",
            "@_user_2",
            "@_all",
            "@_",
            "@",
            "_",
            "_user_1",
            "\u{0}",
            " ",
            "\n",
            "\t",
            "\u{3000}",
            "\r\n",
            "```",
            "```rust\n",
            "  x  ",
            "你好",
            "ok",
        ])
        .prop_map(str::to_string),
        "[a-z0-9 @_]{0,6}",
        // Few letters, so that `@`, `_` and U+0000 meet in every order.
        "[@_\u{0} u1]{0,8}",
        any::<String>(),
    ];
    vec(piece, 0..10).prop_map(|p| p.concat())
}

fn mention() -> impl Strategy<Value = Value> {
    let key = prop_oneof![
        select(vec!["@_user_1", "@_user_2", "@_all", "all", ""]).prop_map(str::to_string),
        word(),
    ];
    let open_id = option::of(prop_oneof![
        Just(BOT.to_string()),
        Just("ou_a".into()),
        word()
    ]);
    let name = prop_oneof![Just("Alice".to_string()), Just(String::new()), rich_text()];
    (key, open_id, name).prop_map(
        |(key, open_id, name)| json!({"key": key, "id": {"open_id": open_id}, "name": name}),
    )
}

/// A post element: every tag the normalizer knows, with any of its fields.
fn element() -> impl Strategy<Value = Value> {
    let tag = prop_oneof![
        select(vec![
            "text",
            "a",
            "at",
            "img",
            "media",
            "emotion",
            "code_block",
            "hr",
            "md",
            "",
        ])
        .prop_map(str::to_string),
        word(),
    ];
    let field = || {
        option::of(prop_oneof![
            rich_text().prop_map(Value::String),
            json::stringish()
        ])
    };
    let names = [
        "text",
        "href",
        "user_id",
        "user_name",
        "emoji_type",
        "language",
    ];
    (tag, [field(), field(), field(), field(), field(), field()]).prop_map(move |(tag, f)| {
        let mut el = json!({"tag": tag});
        for (name, v) in names.iter().zip(f) {
            if let Some(v) = v {
                el[*name] = v;
            }
        }
        el
    })
}

fn post() -> impl Strategy<Value = Value> {
    let paragraphs = vec(
        vec(prop_oneof![4 => element(), 1 => json::value()], 0..5),
        0..4,
    );
    let body = (option::of(rich_text()), paragraphs)
        .prop_map(|(title, content)| json!({"title": title, "content": content}))
        .boxed();
    let locale = select(vec!["zh_cn", "en_us", "ja_jp", "xx"]);
    prop_oneof![
        body.clone(),
        (locale, body).prop_map(|(l, b)| json!({ l: b })),
        json::value(),
    ]
}

fn input() -> impl Strategy<Value = Input> {
    let types = prop_oneof![
        select(vec![
            "text",
            "post",
            "image",
            "file",
            "audio",
            "media",
            "sticker",
            "interactive",
            "share_chat",
            "share_user",
            "merge_forward",
            "location",
            "system",
        ])
        .prop_map(str::to_string),
        word(),
    ];
    let text = rich_text().prop_map(|t| json!({"text": t}));
    let other = (word(), word()).prop_map(|(f, t)| json!({"file_name": f, "title": t}));
    let content = prop_oneof![
        text.prop_map(|v| v.to_string()),
        post().prop_map(|v| v.to_string()),
        other.prop_map(|v| v.to_string()),
        any::<String>(),
    ];
    let bot = option::of(prop_oneof![Just(BOT.to_string()), word()]);
    (types, content, vec(mention(), 0..4), bot).prop_map(|(t, c, m, b)| Input {
        message_type: t,
        content: c,
        mentions: m,
        bot_open_id: b,
    })
}

fn seeds() -> Vec<Input> {
    corpus("content")
        .into_iter()
        .map(|e| Input {
            message_type: e["message_type"].as_str().expect("message_type").into(),
            content: e["content"].as_str().expect("content").into(),
            mentions: e["mentions"].as_array().cloned().unwrap_or_default(),
            bot_open_id: e["bot_open_id"].as_str().map(str::to_string),
        })
        .collect()
}

#[test]
fn normalized_text_keeps_every_documented_promise() {
    fuzz(REGRESSIONS, seeds(), input(), |input| {
        let mentions = input.mentions();
        let bot = input.bot_open_id.as_deref();
        let n = normalize(&input.message_type, &input.content, &mentions, bot);
        // Postgres text cannot hold U+0000; it is gone on both backends.
        prop_assert!(!n.text.contains('\0'), "{:?}", n.text);
        prop_assert_eq!(n.text.trim(), n.text.as_str(), "tidied at both ends");
        // Only this bot's own mention counts; `@all` never does.
        let bot_listed = mentions
            .iter()
            .any(|m| bot.is_some() && m.id.open_id.as_deref() == bot);
        prop_assert!(!n.mentions_bot || bot_listed);
        // Names are every mention with both an open id and a name.
        let names: Vec<(String, String)> = mentions
            .iter()
            .filter_map(|m| Some((m.id.open_id.clone()?, m.name.clone())))
            .filter(|(id, name)| !id.is_empty() && !name.is_empty())
            .collect();
        prop_assert_eq!(&n.names, &names);
        // Anything but text and post is a placeholder, never dropped silently.
        let known = matches!(input.message_type.as_str(), "text" | "post");
        prop_assert_eq!(n.placeholder, !known);
        if n.placeholder {
            prop_assert!(
                n.text.starts_with('[') && n.text.ends_with(']'),
                "{:?}",
                n.text
            );
        }
        Ok(())
    });
}

#[test]
fn no_feishu_mention_key_survives_in_a_text_message() {
    // A name may legitimately spell `@_…`; with names free of `_`, no output may.
    let seeds = seeds()
        .into_iter()
        .filter(|s| s.message_type == "text")
        .filter_map(|s| {
            let content: Value = serde_json::from_str(&s.content).ok()?;
            Some((
                content["text"].as_str()?.to_string(),
                s.mentions,
                s.bot_open_id,
            ))
        })
        .collect();
    let inputs = (
        rich_text(),
        vec(mention(), 0..4),
        option::of(Just(BOT.to_string())),
    );
    fuzz(REGRESSIONS, seeds, inputs, |(text, mentions, bot)| {
        let content = json!({ "text": text }).to_string();
        let input = Input {
            message_type: "text".into(),
            content,
            mentions,
            bot_open_id: bot,
        };
        let mentions: Vec<Mention> = input.mentions();
        if mentions.iter().any(|m| m.name.contains('_')) {
            return Ok(());
        }
        let n = normalize(
            "text",
            &input.content,
            &mentions,
            input.bot_open_id.as_deref(),
        );
        prop_assert!(
            !n.text.contains("@_"),
            "{:?} from {:?}",
            n.text,
            input.content
        );
        Ok(())
    });
}

#[test]
fn normalized_text_normalizes_to_itself() {
    fuzz(REGRESSIONS, seeds(), input(), |input| {
        let mentions = input.mentions();
        let bot = input.bot_open_id.as_deref();
        let once = normalize(&input.message_type, &input.content, &mentions, bot).text;
        if once.contains("@_") {
            // It would be read as a mention key the second time.
            return Ok(());
        }
        let again = normalize("text", &json!({ "text": once }).to_string(), &[], None);
        prop_assert_eq!(again.text, once);
        Ok(())
    });
}
