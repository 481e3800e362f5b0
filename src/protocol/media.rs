//! What a message carries besides its text, as references to fetch later: the images of
//! an `image` message or a `post`, the file of a `file` message, a forwarded bundle
//! (`merge_forward`), and links to Feishu docs (docx and wiki pages). Parsed at ingress
//! from the content alone; nothing is fetched here (a turn fetches what it needs).

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The most references kept from one message.
pub const MAX_REFS: usize = 16;

/// One thing a message refers to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum MediaRef {
    /// An image (`image_key`), fetched as a message resource of type `image`.
    Image { key: String },
    /// A file (`file_key`), fetched as a message resource of type `file`.
    File { key: String, name: String },
    /// The message is a forwarded bundle: its items are read with the message.
    Bundle,
    /// A link to a Feishu doc: `docx` (a document id) or `wiki` (a node token).
    Doc { doc: DocKind, token: String },
}

/// What a doc link names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DocKind {
    /// `/docx/{document_id}`.
    Docx,
    /// `/wiki/{node_token}`.
    Wiki,
}

impl MediaRef {
    /// The resource key, for images and files.
    pub fn key(&self) -> Option<&str> {
        match self {
            Self::Image { key } | Self::File { key, .. } => Some(key),
            _ => None,
        }
    }
}

/// The references in a message's content.
pub fn refs(message_type: &str, content: &str) -> Vec<MediaRef> {
    refs_in(
        message_type,
        &serde_json::from_str(content).unwrap_or(Value::Null),
    )
}

/// [`refs`] of content already parsed (normalizing a message parses it once for both).
pub fn refs_in(message_type: &str, value: &Value) -> Vec<MediaRef> {
    let s = |v: &Value, k: &str| v[k].as_str().filter(|s| is_key(s)).map(str::to_string);
    let mut out = Vec::new();
    match message_type {
        "image" => out.extend(s(value, "image_key").map(|key| MediaRef::Image { key })),
        "file" => out.extend(s(value, "file_key").map(|key| MediaRef::File {
            key,
            name: value["file_name"].as_str().unwrap_or("file").to_string(),
        })),
        "merge_forward" => out.push(MediaRef::Bundle),
        "text" => docs_in(value["text"].as_str().unwrap_or_default(), &mut out),
        "post" => post_refs(value, &mut out),
        _ => {}
    }
    let mut seen = Vec::new();
    out.retain(|r| {
        let fresh = !seen.contains(r);
        seen.push(r.clone());
        fresh
    });
    out.truncate(MAX_REFS);
    out
}

/// Images and doc links of a `post`, received bare or locale-wrapped.
fn post_refs(value: &Value, out: &mut Vec<MediaRef>) {
    let body = if value.get("content").is_some() {
        value
    } else {
        value
            .as_object()
            .and_then(|o| o.values().find(|v| v.get("content").is_some()))
            .unwrap_or(&Value::Null)
    };
    for el in body["content"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|p| p.as_array().into_iter().flatten())
    {
        match el["tag"].as_str().unwrap_or_default() {
            "img" => {
                if let Some(key) = el["image_key"].as_str().filter(|k| is_key(k)) {
                    out.push(MediaRef::Image { key: key.into() });
                }
            }
            "a" => docs_in(el["href"].as_str().unwrap_or_default(), out),
            "text" | "md" => docs_in(el["text"].as_str().unwrap_or_default(), out),
            _ => {}
        }
    }
}

/// Doc links in free text: `https://<tenant>.feishu.cn/docx/<id>` or `…/wiki/<token>`
/// (larksuite.com too).
fn docs_in(text: &str, out: &mut Vec<MediaRef>) {
    // Most messages hold no link: one substring search instead of a split per character.
    if !text.contains("https://") {
        return;
    }
    for word in text.split(|c: char| c.is_whitespace() || "()<>\"'[]".contains(c)) {
        let Some(rest) = word.strip_prefix("https://") else {
            continue;
        };
        let Some((host, path)) = rest.split_once('/') else {
            continue;
        };
        let host = host.to_ascii_lowercase();
        if !(host.ends_with(".feishu.cn") || host.ends_with(".larksuite.com")) {
            continue;
        }
        let mut parts = path.split(['/', '?', '#']);
        let (Some(kind), Some(token)) = (parts.next(), parts.next()) else {
            continue;
        };
        let doc = match kind {
            "docx" => DocKind::Docx,
            "wiki" => DocKind::Wiki,
            _ => continue,
        };
        if is_key(token) {
            out.push(MediaRef::Doc {
                doc,
                token: token.to_string(),
            });
        }
    }
}

/// A key or token as Feishu writes them: letters, digits, `_` and `-`, bounded.
fn is_key(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 128
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn images_files_bundles_and_docs_are_found() {
        assert_eq!(
            refs("image", r#"{"image_key":"img_v2_1"}"#),
            [MediaRef::Image {
                key: "img_v2_1".into()
            }]
        );
        assert_eq!(
            refs("file", r#"{"file_key":"file_v2_1","file_name":"app.log"}"#),
            [MediaRef::File {
                key: "file_v2_1".into(),
                name: "app.log".into()
            }]
        );
        assert_eq!(refs("merge_forward", "{}"), [MediaRef::Bundle]);
        let text = r#"{"text":"see https://acme.feishu.cn/docx/DocA1?from=x and (https://acme.feishu.cn/wiki/WikB2) and https://evil.example/docx/Z"}"#;
        assert_eq!(
            refs("text", text),
            [
                MediaRef::Doc {
                    doc: DocKind::Docx,
                    token: "DocA1".into()
                },
                MediaRef::Doc {
                    doc: DocKind::Wiki,
                    token: "WikB2".into()
                },
            ]
        );
    }

    #[test]
    fn a_post_gives_its_images_and_links_once() {
        let post = r#"{"zh_cn":{"title":"t","content":[[{"tag":"img","image_key":"img_1"},{"tag":"a","text":"spec","href":"https://x.feishu.cn/docx/D1"}],[{"tag":"img","image_key":"img_1"},{"tag":"img","image_key":"../etc"}]]}}"#;
        assert_eq!(
            refs("post", post),
            [
                MediaRef::Image {
                    key: "img_1".into()
                },
                MediaRef::Doc {
                    doc: DocKind::Docx,
                    token: "D1".into()
                },
            ]
        );
    }

    #[test]
    fn content_that_is_not_json_refers_to_nothing() {
        assert!(refs("image", "not json").is_empty());
        assert!(refs("sticker", r#"{"file_key":"k"}"#).is_empty());
    }
}
