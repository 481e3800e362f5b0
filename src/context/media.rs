//! Media context items: what a turn fetched of the images, files, forwarded bundles and
//! doc links its messages carry, each with its type, its budget's cut, and what was
//! left out and why. Pure: the fetching is done elsewhere; this is what it yields, how
//! the prompt shows it, and how the decision records it.

use serde::Serialize;

use super::report::{SelectedItem, preview};
use crate::vocab::MediaItemType;

/// One media item handed to the agent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MediaItem {
    pub item_type: MediaItemType,
    /// The message it came from.
    pub message_id: String,
    /// What it is called: a file's name, a doc's title, `image`, `forwarded messages`.
    pub label: String,
    /// The text given to the agent: a file's or doc's text, a bundle's lines, or a short
    /// line naming an image or a listed file.
    pub text: String,
    /// Cut to its budget.
    pub truncated: bool,
    /// The resource key of an image or a file (what a signed URL serves).
    pub key: Option<String>,
    /// Its size in bytes, when known.
    pub size: Option<u64>,
    /// An image's bytes and MIME type (for agents that take images inline).
    pub image: Option<(String, Vec<u8>)>,
}

impl MediaItem {
    /// Whether its text is inlined into the prompt (text files, bundles, docs) rather
    /// than only named (images, listed files).
    pub fn inlined(&self) -> bool {
        matches!(
            self.item_type,
            MediaItemType::TextFile | MediaItemType::Bundle | MediaItemType::Doc
        )
    }
}

/// Something a message carried that the turn did not hand over, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Skipped {
    pub item_type: MediaItemType,
    pub message_id: String,
    pub label: String,
    /// `too_many_images`, `too_large`, `files_budget`, `too_many_docs`, `not_readable`,
    /// `fetch_failed`.
    pub reason: &'static str,
    /// What happened, in words (an Open API code, a size).
    pub detail: String,
}

/// What a turn fetched, in a fixed order: the request's message first, the message it
/// quotes, then the selected context's messages, newest first; within a message, as it
/// carried them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Media {
    pub items: Vec<MediaItem>,
    pub skipped: Vec<Skipped>,
}

impl Media {
    /// Characters of inlined text.
    pub fn chars(&self) -> usize {
        self.items
            .iter()
            .filter(|i| i.inlined())
            .map(|i| i.text.chars().count())
            .sum()
    }

    /// The lines of the prompt's shared-content block: each item, then each thing left
    /// out (so the agent knows it was shared).
    pub fn prompt_lines(&self) -> Vec<(String, String, bool)> {
        let mut out: Vec<(String, String, bool)> = self
            .items
            .iter()
            .map(|i| {
                (
                    format!("{} {}", i.item_type, i.label),
                    i.text.clone(),
                    i.truncated,
                )
            })
            .collect();
        out.extend(self.skipped.iter().map(|s| {
            (
                format!("{} {}", s.item_type, s.label),
                format!("not included ({}: {})", s.reason, s.detail),
                false,
            )
        }));
        out
    }

    /// The items as the decision's selected list shows them.
    pub fn selected_items(&self) -> Vec<SelectedItem> {
        self.items
            .iter()
            .map(|i| SelectedItem {
                item_id: 0,
                item_type: i.item_type.to_string(),
                author_label: i.label.clone(),
                chars: i.text.chars().count(),
                preview: preview(&i.text, 80),
                truncated: i.truncated,
                created_at: None,
            })
            .collect()
    }

    /// What was left out, as the decision's excluded list shows it.
    pub fn excluded_items(&self) -> Vec<serde_json::Value> {
        self.skipped
            .iter()
            .map(|s| {
                serde_json::json!({
                    "item_id": 0,
                    "item_type": s.item_type,
                    "reason": s.reason,
                    "created_at": null,
                })
            })
            .collect()
    }

    /// The diagnostics of the media block.
    pub fn diagnostics(&self) -> serde_json::Value {
        let count = |t: MediaItemType| self.items.iter().filter(|i| i.item_type == t).count();
        serde_json::json!({
            "images": count(MediaItemType::Image),
            "text_files": count(MediaItemType::TextFile),
            "files": count(MediaItemType::File),
            "bundles": count(MediaItemType::Bundle),
            "docs": count(MediaItemType::Doc),
            "chars": self.chars(),
            "skipped": self.skipped,
        })
    }
}

/// `text` cut to `max` characters: (kept, was it cut).
pub fn cut(text: &str, max: usize) -> (String, bool) {
    match text.char_indices().nth(max) {
        Some((at, _)) => (text[..at].to_string(), true),
        None => (text.to_string(), false),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn item(item_type: MediaItemType, text: &str) -> MediaItem {
        MediaItem {
            item_type,
            message_id: "om_1".into(),
            label: "a.log".into(),
            text: text.into(),
            truncated: false,
            key: None,
            size: None,
            image: None,
        }
    }

    #[test]
    fn only_inlined_text_counts_as_characters() {
        let media = Media {
            items: vec![
                item(MediaItemType::TextFile, "abcd"),
                item(MediaItemType::Image, "image of 10 bytes"),
            ],
            skipped: Vec::new(),
        };
        assert_eq!(media.chars(), 4);
        assert_eq!(media.diagnostics()["images"], 1);
    }

    #[test]
    fn cutting_counts_characters_not_bytes() {
        assert_eq!(cut("你好世界", 2), ("你好".to_string(), true));
        assert_eq!(cut("ab", 2), ("ab".to_string(), false));
    }
}
