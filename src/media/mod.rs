//! Media in and out: what a turn fetches of the images, files, forwarded bundles and
//! doc links its messages carry (`fetch`), the signed URLs a webhook agent reads images
//! and files through (`token`), and reading an agent's multipart attachment
//! (`multipart`). No file body is stored in the database: a URL's bytes are fetched from
//! Feishu when it is read.

pub mod fetch;
pub mod multipart;
pub mod token;

use crate::{
    agent::MediaLink,
    context::media::Media,
    protocol::media::MediaRef,
    store::{MediaStore, StoreError},
};

/// The media references of `message_ids` as `profile` recorded them (recalled messages
/// have none), in the order of `message_ids`.
pub async fn refs_of(
    store: &dyn MediaStore,
    profile: &str,
    message_ids: &[String],
) -> Result<Vec<(String, Vec<MediaRef>)>, StoreError> {
    let rows = store.media_metadata(profile, message_ids).await?;
    Ok(message_ids
        .iter()
        .filter_map(|id| {
            let (_, metadata) = rows.iter().find(|(m, _)| m == id)?;
            let refs = parse_refs(metadata);
            (!refs.is_empty()).then(|| (id.clone(), refs))
        })
        .collect())
}

/// The references kept in a record's metadata (none when it has none or cannot be read).
pub fn parse_refs(metadata_json: &str) -> Vec<MediaRef> {
    serde_json::from_str::<serde_json::Value>(metadata_json)
        .ok()
        .and_then(|v| serde_json::from_value(v["media"].clone()).ok())
        .unwrap_or_default()
}

/// Signed URLs for the images and files of `media`, valid `ttl_secs` from `now`.
pub fn links(
    media: &Media,
    (profile, secret): (&str, &str),
    base: Option<&str>,
    now: i64,
    ttl_secs: u64,
) -> Vec<MediaLink> {
    let expires = now.saturating_add(i64::try_from(ttl_secs).unwrap_or(i64::MAX));
    media
        .items
        .iter()
        .filter_map(|i| {
            let key = i.key.as_ref()?;
            let kind = if i.image.is_some() { "image" } else { "file" };
            let claims = token::Claims {
                profile: profile.to_string(),
                message_id: i.message_id.clone(),
                key: key.clone(),
                kind: kind.to_string(),
                expires,
            };
            let path = format!("/media/{}", token::sign(secret, &claims));
            Some(MediaLink {
                item_type: i.item_type.to_string(),
                message_id: i.message_id.clone(),
                name: i.label.clone(),
                size: i.size,
                url: match base {
                    Some(b) => format!("{}{path}", b.trim_end_matches('/')),
                    None => path,
                },
                expires_at: expires,
            })
        })
        .collect()
}
