//! Fetching, for one turn, what its messages carry: images (bounded in count and
//! size), text files (inlined up to a per-file and a per-turn character budget; other
//! files listed by name and size), forwarded bundles (as `sender: text` lines) and
//! Feishu docs (their text, cut to a budget; a doc the bot cannot read is named, not
//! fetched). Every failure is recorded with its reason and never fails the turn.

use crate::{
    config::MediaConfig,
    context::media::{Media, MediaItem, Skipped, cut},
    feishu_api::{
        FeishuClient, OpenApiError,
        codes::{self, DOC_FORBIDDEN, RESOURCE_GONE},
        media::DocError,
    },
    protocol::{
        content,
        media::{DocKind, MediaRef},
    },
    store::EventLog,
    vocab::MediaItemType,
};

/// Extensions of files whose text is inlined.
const TEXT_EXTENSIONS: &[&str] = &[
    "txt",
    "md",
    "markdown",
    "log",
    "json",
    "jsonl",
    "csv",
    "tsv",
    "yaml",
    "yml",
    "toml",
    "xml",
    "ini",
    "cfg",
    "conf",
    "sh",
    "py",
    "rs",
    "go",
    "js",
    "mjs",
    "ts",
    "tsx",
    "jsx",
    "java",
    "kt",
    "c",
    "h",
    "cc",
    "cpp",
    "hpp",
    "cs",
    "rb",
    "php",
    "sql",
    "swift",
    "scala",
    "lua",
    "r",
    "html",
    "css",
    "scss",
    "vue",
    "diff",
    "patch",
    "proto",
    "gradle",
    "dockerfile",
];

/// Whether a file of this name is inlined as text.
pub fn is_text_name(name: &str) -> bool {
    let lower = name.to_ascii_lowercase();
    let ext = lower.rsplit_once('.').map_or(lower.as_str(), |(_, e)| e);
    TEXT_EXTENSIONS.contains(&ext)
}

/// What fetching needs.
pub struct Fetcher<'a> {
    pub client: &'a FeishuClient,
    pub config: &'a MediaConfig,
    /// Where bundle senders' names are looked up.
    pub names: &'a dyn EventLog,
    pub profile: &'a str,
    /// This bot (its mention is dropped from bundle lines).
    pub bot_open_id: Option<&'a str>,
}

/// The running budgets of one turn.
#[derive(Default)]
struct Spent {
    images: usize,
    file_chars: usize,
    docs: usize,
}

impl Fetcher<'_> {
    /// Fetches what `messages` carry, in their order (each with its references).
    pub async fn fetch(&self, messages: &[(String, Vec<MediaRef>)]) -> Media {
        let mut media = Media::default();
        let mut spent = Spent::default();
        for (message_id, refs) in messages {
            for r in refs {
                self.one(message_id, r, &mut spent, &mut media).await;
            }
        }
        media
    }

    async fn one(&self, message_id: &str, r: &MediaRef, spent: &mut Spent, media: &mut Media) {
        let skip = |item_type, label: &str, reason, detail: String| Skipped {
            item_type,
            message_id: message_id.to_string(),
            label: label.to_string(),
            reason,
            detail,
        };
        let outcome = match r {
            MediaRef::Image { key } => self.image(message_id, key, spent).await,
            MediaRef::File { key, name } => self.file(message_id, key, name, spent).await,
            MediaRef::Bundle => self.bundle(message_id).await,
            MediaRef::Doc { doc, token } => self.doc(message_id, *doc, token, spent).await,
        };
        match outcome {
            Ok(item) => media.items.push(item),
            Err((item_type, label, reason, detail)) => {
                media.skipped.push(skip(item_type, &label, reason, detail));
            }
        }
    }

    async fn image(
        &self,
        message_id: &str,
        key: &str,
        spent: &mut Spent,
    ) -> Result<MediaItem, Refusal> {
        let t = MediaItemType::Image;
        let label = "image".to_string();
        if spent.images >= self.config.max_images {
            let detail = format!("more than media.max_images ({})", self.config.max_images);
            return Err((t, label, "too_many_images", detail));
        }
        let max = self.config.max_image_bytes;
        let got = self
            .client
            .resource(message_id, key, "image", max)
            .await
            .map_err(|e| failed(t, &label, &e))?;
        if got.cut || got.size.is_some_and(|s| s > max as u64) {
            let size = got.size.map_or("more".into(), |s| s.to_string());
            let detail = format!("{size} bytes, over media.max_image_bytes ({max})");
            return Err((t, label, "too_large", detail));
        }
        spent.images += 1;
        let mime = image_type(&got.bytes, got.content_type.as_deref());
        let size = got.bytes.len() as u64;
        Ok(MediaItem {
            item_type: t,
            message_id: message_id.to_string(),
            text: format!("an image ({mime}, {size} bytes)"),
            label,
            truncated: false,
            key: Some(key.to_string()),
            size: Some(size),
            image: Some((mime, got.bytes)),
        })
    }

    async fn file(
        &self,
        message_id: &str,
        key: &str,
        name: &str,
        spent: &mut Spent,
    ) -> Result<MediaItem, Refusal> {
        let left = self
            .config
            .max_files_chars
            .saturating_sub(spent.file_chars)
            .min(self.config.max_file_chars);
        let text_like = is_text_name(name);
        if text_like && left == 0 {
            let detail = format!(
                "the turn's text files already fill media.max_files_chars ({})",
                self.config.max_files_chars
            );
            return Err((MediaItemType::TextFile, name.into(), "files_budget", detail));
        }
        // A listed file is read for its size alone.
        let cap = if text_like { left.saturating_mul(4) } else { 0 };
        let t = if text_like {
            MediaItemType::TextFile
        } else {
            MediaItemType::File
        };
        let got = self
            .client
            .resource(message_id, key, "file", cap)
            .await
            .map_err(|e| failed(t, name, &e))?;
        let binary = got.bytes.contains(&0);
        let mut item = MediaItem {
            item_type: MediaItemType::File,
            message_id: message_id.to_string(),
            label: name.to_string(),
            text: match got.size {
                Some(size) => format!("a file of {size} bytes, not inlined"),
                None => "a file, not inlined".into(),
            },
            truncated: false,
            key: Some(key.to_string()),
            size: got.size,
            image: None,
        };
        if text_like && !binary {
            let whole = String::from_utf8_lossy(&got.bytes);
            let (text, cut_here) = cut(&whole, left);
            spent.file_chars += text.chars().count();
            item.item_type = MediaItemType::TextFile;
            item.truncated = cut_here || got.cut;
            item.text = text;
        }
        Ok(item)
    }

    async fn bundle(&self, message_id: &str) -> Result<MediaItem, Refusal> {
        let t = MediaItemType::Bundle;
        let label = "forwarded messages".to_string();
        let items = self
            .client
            .bundle(message_id)
            .await
            .map_err(|e| failed(t, &label, &e))?;
        let senders: Vec<String> = items.iter().map(|i| i.sender.clone()).collect();
        let names = self
            .names
            .names_among(self.profile, &senders)
            .await
            .unwrap_or_default();
        let lines: Vec<String> = items
            .iter()
            .map(|i| {
                let who = names
                    .iter()
                    .find(|(id, _)| *id == i.sender)
                    .map_or(i.sender.as_str(), |(_, n)| n.as_str());
                let said = content::normalize(&i.msg_type, &i.content, &[], self.bot_open_id);
                format!("{}: {}", who, said.text.replace('\n', " "))
            })
            .collect();
        let (text, truncated) = cut(&lines.join("\n"), self.config.max_bundle_chars);
        Ok(MediaItem {
            item_type: t,
            message_id: message_id.to_string(),
            label: format!("{label} ({} messages)", items.len()),
            text,
            truncated,
            key: None,
            size: None,
            image: None,
        })
    }

    async fn doc(
        &self,
        message_id: &str,
        doc: DocKind,
        token: &str,
        spent: &mut Spent,
    ) -> Result<MediaItem, Refusal> {
        let t = MediaItemType::Doc;
        let label = match doc {
            DocKind::Docx => format!("docx {token}"),
            DocKind::Wiki => format!("wiki {token}"),
        };
        if spent.docs >= self.config.max_docs {
            let detail = format!("more than media.max_docs ({})", self.config.max_docs);
            return Err((t, label, "too_many_docs", detail));
        }
        spent.docs += 1;
        let read = self
            .client
            .doc_text(doc == DocKind::Wiki, token)
            .await
            .map_err(|e| match e {
                DocError::NotDocx(kind) => (
                    t,
                    label.clone(),
                    "not_readable",
                    format!("the wiki node is a {kind}, not a docx document"),
                ),
                DocError::Api(e) => failed(t, &label, &e),
            })?;
        let (text, truncated) = cut(&read.text, self.config.max_doc_chars);
        Ok(MediaItem {
            item_type: t,
            message_id: message_id.to_string(),
            label: read
                .title
                .map_or(label, |title| format!("{title} ({token})")),
            text,
            truncated,
            key: None,
            size: None,
            image: None,
        })
    }
}

/// An item left out: its type, label, reason and detail.
type Refusal = (MediaItemType, String, &'static str, String);

/// A fetch that failed: `not_readable` for what Feishu says is gone or forbidden,
/// `fetch_failed` for the rest.
fn failed(t: MediaItemType, label: &str, e: &OpenApiError) -> Refusal {
    let gone = e
        .code()
        .is_some_and(|c| codes::is(&RESOURCE_GONE, c) || codes::is(&DOC_FORBIDDEN, c));
    let reason = if gone { "not_readable" } else { "fetch_failed" };
    (t, label.to_string(), reason, e.to_string())
}

/// An image's MIME type: from its first bytes, else what the answer said.
fn image_type(bytes: &[u8], said: Option<&str>) -> String {
    let sniffed = if bytes.starts_with(b"\x89PNG") {
        Some("image/png")
    } else if bytes.starts_with(&[0xFF, 0xD8, 0xFF]) {
        Some("image/jpeg")
    } else if bytes.starts_with(b"GIF8") {
        Some("image/gif")
    } else if bytes.len() > 12 && &bytes[..4] == b"RIFF" && &bytes[8..12] == b"WEBP" {
        Some("image/webp")
    } else {
        None
    };
    sniffed
        .map(str::to_string)
        .or_else(|| said.filter(|t| t.starts_with("image/")).map(str::to_string))
        .unwrap_or_else(|| "image/png".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_files_are_known_by_their_extension() {
        assert!(is_text_name("app.LOG"));
        assert!(is_text_name("main.rs"));
        assert!(!is_text_name("report.pdf"));
        assert!(!is_text_name("noext"));
    }

    #[test]
    fn image_types_are_sniffed_first() {
        assert_eq!(image_type(b"\x89PNG....", Some("image/jpeg")), "image/png");
        assert_eq!(image_type(b"????", Some("image/gif")), "image/gif");
        assert_eq!(image_type(b"????", Some("text/plain")), "image/png");
    }
}
