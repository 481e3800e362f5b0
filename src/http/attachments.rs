//! `POST /agent/{profile}/turns/{turn_id}/attachments`: a file or an image an agent
//! made, sent into its turn's chat or thread. Signed like the agent's other callbacks;
//! a multipart body (`file`, and optionally `name` and `kind`). Uploaded through
//! `im/v1/images` or `im/v1/files` within Feishu's limits (10 MB per image, 30 MB per
//! file, no empty ones), then sent with a uuid derived from the turn and the
//! attachment's key: a retried request (the same `Idempotency-Key`, or the same bytes,
//! name and kind) sends nothing twice.

use axum::{
    Json,
    body::{Body, Bytes},
    extract::State,
    http::{HeaderMap, StatusCode},
};
use serde::Serialize;
use sha2::{Digest, Sha256};
use utoipa::ToSchema;

use super::{ApiError, AppState, ErrorBody, agent_callback::verify_signature, extract::Path};
use crate::{
    config::FEISHU_IMAGE_MAX_BYTES,
    feishu_api::{
        codes::{self, UPLOAD_SIZE},
        media::Upload,
        reply::{Content, Destination},
    },
    media::multipart,
    redact::echo,
    store::{AttachmentRow, NewAttachment},
    util::UnixMs,
};

/// Feishu's largest file upload (`im/v1/files`): 30 MB.
pub const FILE_MAX_BYTES: usize = 30 * 1024 * 1024;

/// The largest request body the route reads: the largest file and its multipart frame.
pub const BODY_MAX_BYTES: usize = FILE_MAX_BYTES + 64 * 1024;

/// Extensions sent as images when the request names no kind.
const IMAGE_EXTENSIONS: &[&str] = &["png", "jpg", "jpeg", "gif", "webp", "bmp", "tiff", "ico"];

/// An attachment of a turn.
#[derive(Debug, Serialize, ToSchema)]
pub struct AttachmentBody {
    pub turn_id: String,
    /// Its idempotency key (the request's `Idempotency-Key`, or derived from it).
    pub key: String,
    pub name: String,
    /// `image` or `file`.
    pub kind: String,
    pub size_bytes: i64,
    /// The message it was sent as (none while it is being sent).
    pub message_id: Option<String>,
    /// Unix ms it was sent.
    pub sent_at: Option<i64>,
    /// This request repeated one already sent (nothing was sent again).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub duplicate: Option<bool>,
}

impl AttachmentBody {
    /// The body of a stored row.
    pub fn of(r: AttachmentRow) -> Self {
        Self {
            turn_id: r.turn_id,
            key: r.key,
            name: r.name,
            kind: r.kind,
            size_bytes: r.size_bytes,
            message_id: r.message_id,
            sent_at: r.sent_at.map(UnixMs::millis),
            duplicate: None,
        }
    }
}

fn refused(status: StatusCode, code: &'static str, message: impl Into<String>) -> ApiError {
    ApiError::Media(status, code, message.into())
}

/// Sends an agent's file or image into its turn's chat or thread.
#[utoipa::path(post, path = "/agent/{profile}/turns/{turn_id}/attachments", tag = "agents",
    params(
        ("profile" = String, Path, description = "Profile name"),
        ("turn_id" = String, Path, description = "The turn the attachment belongs to"),
        ("webhook-id" = String, Header, description = "Message id (any unique string)"),
        ("webhook-timestamp" = String, Header, description = "Unix seconds; within 5 minutes"),
        ("webhook-signature" = String, Header, description = "`v1,` + base64 HMAC-SHA256 of `id.timestamp.body` with the agent secret (the body: the multipart bytes as sent)"),
        ("Idempotency-Key" = Option<String>, Header, description = "Makes a retried request send once (default: derived from the bytes, name and kind)"),
    ),
    request_body(content = String, content_type = "multipart/form-data", description = "`file` (the bytes, with a filename), optionally `name` and `kind` (`image` or `file`; default by the file name)"),
    responses(
        (status = 200, description = "Sent (or sent before: `duplicate`)", body = AttachmentBody),
        (status = 400, description = "`bad_request`: not multipart, no `file` part, an unknown `kind`, a bad `Idempotency-Key`; or `empty_attachment`: zero bytes", body = ErrorBody),
        (status = 401, description = "`bad_signature`", body = ErrorBody),
        (status = 404, description = "`unknown_profile`, or `unknown_turn`: no turn of this profile under this id", body = ErrorBody),
        (status = 409, description = "`cannot_send`: the profile has no app secret (a dry run)", body = ErrorBody),
        (status = 413, description = "`attachment_too_large`: over Feishu's limit (10 MB per image, 30 MB per file), or `payload_too_large`", body = ErrorBody),
        (status = 502, description = "`attachment_failed`: the Open API refused or failed; nothing was sent", body = ErrorBody),
        (status = 503, description = "`store_unavailable`", body = ErrorBody),
    ))]
pub async fn post(
    State(app): State<AppState>,
    Path((profile, turn_id)): Path<(String, String)>,
    headers: HeaderMap,
    body: Body,
) -> Result<Json<AttachmentBody>, ApiError> {
    if app.config.profile(&profile).is_none() {
        return Err(ApiError::UnknownProfile(profile));
    }
    // Read here, up to Feishu's file limit and its frame, rather than within
    // `server.max_body_bytes` as every other body.
    let body = axum::body::to_bytes(body, BODY_MAX_BYTES)
        .await
        .map_err(|_| ApiError::PayloadTooLarge(BODY_MAX_BYTES))?;
    verify_signature(&app, &profile, &headers, &body)?;
    let turn = app
        .store
        .turn(&turn_id)
        .await
        .map_err(ApiError::store)?
        .filter(|t| t.profile == profile)
        .ok_or_else(|| ApiError::NoSuchTurn(turn_id.clone()))?;
    let a = Attachment::read(&headers, body.clone()).await?;
    let client = app
        .clients
        .get(&profile)
        .filter(|c| c.can_send())
        .ok_or_else(|| {
            refused(
                StatusCode::CONFLICT,
                "cannot_send",
                "this profile has no app_secret (a dry run): nothing can be uploaded",
            )
        })?;
    let key = match a.idempotency_key {
        Some(k) => k.to_string(),
        None => hex::encode(&digest(&[a.kind.as_bytes(), a.name.as_bytes(), &a.data])[..16]),
    };
    let new = NewAttachment {
        turn_id: &turn_id,
        key: &key,
        profile: &profile,
        name: &a.name,
        kind: a.kind,
        size_bytes: i64::try_from(a.data.len()).unwrap_or(i64::MAX),
        now: UnixMs::now(),
    };
    let (row, _) = app
        .store
        .begin_attachment(&new)
        .await
        .map_err(ApiError::store)?;
    if row.message_id.is_some() {
        let mut body = AttachmentBody::of(row);
        body.duplicate = Some(true);
        return Ok(Json(body));
    }
    // Not sent yet (new, or a request before this one did not finish): upload, then
    // send with the uuid of this turn and key, which Feishu posts once.
    let upload = if a.kind == "image" {
        Upload::Image
    } else {
        Upload::File {
            file_type: file_type(&a.name),
        }
    };
    let failed = |e: crate::feishu_api::OpenApiError| {
        if e.code().is_some_and(|c| codes::is(&UPLOAD_SIZE, c)) {
            refused(
                StatusCode::PAYLOAD_TOO_LARGE,
                "attachment_too_large",
                e.to_string(),
            )
        } else {
            tracing::warn!(profile = %profile, turn_id = %turn_id, error = %e, "an attachment could not be sent");
            refused(StatusCode::BAD_GATEWAY, "attachment_failed", e.to_string())
        }
    };
    let resource = client
        .upload(upload, &a.name, &a.data)
        .await
        .map_err(failed)?;
    let content = match upload {
        Upload::Image => Content::Image(&resource),
        Upload::File { .. } => Content::File(&resource),
    };
    let in_thread = !serde_json::from_str::<serde_json::Value>(&turn.job_json)
        .ok()
        .and_then(|j| j["is_dm"].as_bool())
        .unwrap_or(false);
    let to = Destination::Reply {
        message_id: &turn.message_id,
        in_thread,
    };
    let uuid = format!(
        "att-{}",
        &hex::encode(digest(&[turn_id.as_bytes(), key.as_bytes()]))[..40]
    );
    let sent = client.post(to, content, &uuid).await.map_err(failed)?;
    let now = UnixMs::now();
    app.store
        .attachment_sent(&turn_id, &key, (&resource, &sent.message_id), now)
        .await
        .map_err(ApiError::store)?;
    let mut body = AttachmentBody::of(AttachmentRow {
        resource_key: Some(resource),
        message_id: Some(sent.message_id),
        sent_at: Some(now),
        ..row
    });
    body.duplicate = Some(false);
    Ok(Json(body))
}

/// What the request asks to send.
struct Attachment<'a> {
    data: Bytes,
    name: String,
    kind: &'static str,
    idempotency_key: Option<&'a str>,
}

impl<'a> Attachment<'a> {
    /// Reads and checks the request: multipart, a file part within Feishu's limits, a
    /// known kind, a sane key.
    async fn read(headers: &'a HeaderMap, body: Bytes) -> Result<Self, ApiError> {
        let bad = |m: &str| ApiError::BadRequest(m.to_string());
        let content_type = headers
            .get(axum::http::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default();
        let boundary = multipart::boundary(content_type)
            .ok_or_else(|| bad("the body must be multipart/form-data with a boundary"))?;
        let parts = multipart::parse(body, &boundary)
            .await
            .map_err(|e| bad(&e))?;
        let field = |n: &str| parts.iter().find(|p| p.name == n);
        let file = field("file").ok_or_else(|| bad("a `file` part is required"))?;
        let text = |n: &str| {
            field(n)
                .map(|p| String::from_utf8_lossy(&p.data).trim().to_string())
                .filter(|s| !s.is_empty())
        };
        let name = text("name")
            .or_else(|| file.filename.clone())
            .map(|n: String| clean_name(&n))
            .filter(|n| !n.is_empty())
            .unwrap_or_else(|| "attachment".into());
        let kind = match text("kind").as_deref() {
            Some("image") => "image",
            Some("file") => "file",
            Some(other) => {
                return Err(bad(&format!(
                    "unknown kind {:?}: use image or file",
                    echo(other)
                )));
            }
            None if is_image_name(&name) => "image",
            None => "file",
        };
        let idempotency_key = headers
            .get("idempotency-key")
            .map(|v| {
                v.to_str()
                    .ok()
                    .filter(|k| !k.is_empty() && k.len() <= 128)
                    .filter(|k| k.chars().all(|c| c.is_ascii_graphic()))
                    .ok_or_else(|| bad("Idempotency-Key must be 1 to 128 visible ASCII characters"))
            })
            .transpose()?;
        if file.data.is_empty() {
            return Err(refused(
                StatusCode::BAD_REQUEST,
                "empty_attachment",
                "the file is empty: Feishu refuses 0-byte uploads",
            ));
        }
        let max = if kind == "image" {
            FEISHU_IMAGE_MAX_BYTES
        } else {
            FILE_MAX_BYTES
        };
        if file.data.len() > max {
            return Err(refused(
                StatusCode::PAYLOAD_TOO_LARGE,
                "attachment_too_large",
                format!(
                    "{} bytes: Feishu takes at most {max} bytes per {kind}",
                    file.data.len()
                ),
            ));
        }
        Ok(Self {
            data: file.data.clone(),
            name,
            kind,
            idempotency_key,
        })
    }
}

/// SHA-256 of the parts, each followed by a NUL.
fn digest(parts: &[&[u8]]) -> Vec<u8> {
    let mut h = Sha256::new();
    for p in parts {
        h.update(p);
        h.update([0]);
    }
    h.finalize().to_vec()
}

/// A file name fit to show: its last path segment, no control characters, bounded.
fn clean_name(name: &str) -> String {
    let last = name.rsplit(['/', '\\']).next().unwrap_or(name);
    last.chars()
        .filter(|c| !c.is_control())
        .take(200)
        .collect::<String>()
        .trim()
        .to_string()
}

fn extension(name: &str) -> String {
    name.rsplit_once('.')
        .map(|(_, e)| e.to_ascii_lowercase())
        .unwrap_or_default()
}

fn is_image_name(name: &str) -> bool {
    IMAGE_EXTENSIONS.contains(&extension(name).as_str())
}

/// Feishu's `file_type` for a file of this name.
fn file_type(name: &str) -> &'static str {
    match extension(name).as_str() {
        "opus" => "opus",
        "mp4" => "mp4",
        "pdf" => "pdf",
        "doc" | "docx" => "doc",
        "xls" | "xlsx" => "xls",
        "ppt" | "pptx" => "ppt",
        _ => "stream",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_cleaned_and_typed() {
        assert_eq!(clean_name("../../etc/pass\nwd.txt"), "passwd.txt");
        assert_eq!(file_type("Report.PDF"), "pdf");
        assert_eq!(file_type("notes.txt"), "stream");
        assert!(is_image_name("chart.PNG"));
        assert!(!is_image_name("chart.csv"));
    }
}
