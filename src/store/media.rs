//! What a turn reads of the media references its messages carry, and the attachments an
//! agent sent into its turn's chat (idempotent per turn and key).

use async_trait::async_trait;

use super::StoreError;
use crate::util::UnixMs;

/// An attachment to record before it is sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewAttachment<'a> {
    pub turn_id: &'a str,
    /// The client's `Idempotency-Key`, or one derived from what is sent.
    pub key: &'a str,
    pub profile: &'a str,
    pub name: &'a str,
    /// `image` or `file`.
    pub kind: &'a str,
    pub size_bytes: i64,
    pub now: UnixMs,
}

/// An attachment as stored.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct AttachmentRow {
    pub turn_id: String,
    #[sqlx(rename = "idem_key")]
    pub key: String,
    pub profile: String,
    pub name: String,
    pub kind: String,
    pub size_bytes: i64,
    /// The `image_key` / `file_key` of its upload, once uploaded.
    pub resource_key: Option<String>,
    /// The message it was sent as, once sent.
    pub message_id: Option<String>,
    pub created_at: UnixMs,
    pub sent_at: Option<UnixMs>,
}

/// Media references and attachments.
#[async_trait]
pub trait MediaStore: Send + Sync + 'static {
    /// The metadata (JSON text) this profile recorded with each of these messages, not
    /// recalled: `(message_id, metadata_json)`, one per message.
    async fn media_metadata(
        &self,
        profile: &str,
        message_ids: &[String],
    ) -> Result<Vec<(String, String)>, StoreError>;
    /// Records an attachment about to be sent; one already recorded under the same turn
    /// and key is answered instead (`true`: it was new).
    async fn begin_attachment(
        &self,
        new: &NewAttachment<'_>,
    ) -> Result<(AttachmentRow, bool), StoreError>;
    /// Marks an attachment sent as `message_id`, its upload known as `resource_key`.
    async fn attachment_sent(
        &self,
        turn_id: &str,
        key: &str,
        (resource_key, message_id): (&str, &str),
        now: UnixMs,
    ) -> Result<(), StoreError>;
    /// A turn's attachments, oldest first.
    async fn turn_attachments(&self, turn_id: &str) -> Result<Vec<AttachmentRow>, StoreError>;
}
