//! `[media]`: what a turn fetches of the images, files, forwarded bundles and doc links
//! its messages carry, within which budgets, and how long a webhook agent's signed media
//! URLs live.

use serde::Deserialize;

use super::problems::Problems;

/// Feishu's largest image upload (`im/v1/images`): 10 MB.
pub const FEISHU_IMAGE_MAX_BYTES: usize = 10 * 1024 * 1024;

/// `[media]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct MediaConfig {
    /// Fetch what messages carry when a turn needs it (off: placeholders only).
    pub enabled: bool,
    /// Most images handed to the agent per turn (the newest messages' first).
    pub max_images: usize,
    /// Largest image handed to the agent, in bytes; a larger one is skipped.
    pub max_image_bytes: usize,
    /// Most characters inlined from one text file.
    pub max_file_chars: usize,
    /// Most characters inlined from all text files of a turn together.
    pub max_files_chars: usize,
    /// Most characters of one forwarded bundle's `sender: text` lines.
    pub max_bundle_chars: usize,
    /// Most characters of one Feishu doc's text.
    pub max_doc_chars: usize,
    /// Most doc links fetched per turn.
    pub max_docs: usize,
    /// How long a webhook agent's signed `GET /media/{token}` URL is valid.
    pub url_ttl_secs: u64,
    /// The bridge's public base URL (`https://bridge.example.com`): media URLs given to
    /// webhook agents start with it; without it they are paths (`/media/{token}`).
    pub public_url: Option<String>,
}

impl Default for MediaConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            max_images: 4,
            max_image_bytes: 5 * 1024 * 1024,
            max_file_chars: 8_000,
            max_files_chars: 20_000,
            max_bundle_chars: 6_000,
            max_doc_chars: 12_000,
            max_docs: 3,
            url_ttl_secs: 900,
            public_url: None,
        }
    }
}

/// The checks of `[media]`.
pub(super) fn validate(m: &MediaConfig, out: &mut Problems) {
    for (ok, key, why) in [
        (m.max_images <= 20, "media.max_images", "must be at most 20"),
        (
            (1..=FEISHU_IMAGE_MAX_BYTES).contains(&m.max_image_bytes),
            "media.max_image_bytes",
            "must be between 1 and 10485760 (Feishu's image limit)",
        ),
        (
            m.max_file_chars >= 100,
            "media.max_file_chars",
            "must be at least 100",
        ),
        (
            m.max_files_chars >= m.max_file_chars,
            "media.max_files_chars",
            "must be at least media.max_file_chars",
        ),
        (
            m.max_bundle_chars >= 100,
            "media.max_bundle_chars",
            "must be at least 100",
        ),
        (
            m.max_doc_chars >= 100,
            "media.max_doc_chars",
            "must be at least 100",
        ),
        (m.max_docs <= 10, "media.max_docs", "must be at most 10"),
        (
            (10..=86_400).contains(&m.url_ttl_secs),
            "media.url_ttl_secs",
            "must be between 10 and 86400",
        ),
        (
            m.public_url.as_deref().is_none_or(|u| {
                (u.starts_with("https://") || u.starts_with("http://"))
                    && url::Url::parse(u).is_ok()
            }),
            "media.public_url",
            "must be an http(s) URL",
        ),
    ] {
        out.require(ok, key, || why.into());
    }
}
