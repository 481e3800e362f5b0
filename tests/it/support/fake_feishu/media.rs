//! Media: message resources (`GET …/messages/{id}/resources/{key}?type=image|file`),
//! forwarded bundles (answered by the get-message endpoint, see `reads`), wiki nodes and
//! docx raw content, and uploads (`POST im/v1/images`, `POST im/v1/files`), with
//! Feishu's documented limits and codes: 234003 for a key not in the message, 234001
//! for a bad parameter, 234006 for an upload over its limit (10 MB per image, 30 MB per
//! file), 234010 for an empty one; 131006 and 1770032 for a wiki node or a doc the app
//! may not read; 131005 / 1770002 for one that does not exist.

use std::{
    collections::{HashMap, HashSet},
    sync::{
        Arc, Mutex,
        atomic::{AtomicUsize, Ordering},
    },
};

use axum::{
    body::Bytes,
    extract::{Path, Query, State},
    http::{HeaderMap, StatusCode, Uri, header},
    response::{IntoResponse, Response},
};
use feishu_bridge::media::multipart;
use serde_json::{Value, json};

use super::{FakeState, gate::success};

/// Feishu's largest image upload.
pub const IMAGE_MAX_BYTES: usize = 10 * 1024 * 1024;
/// Feishu's largest file upload.
pub const FILE_MAX_BYTES: usize = 30 * 1024 * 1024;
/// The `file_type`s `im/v1/files` takes.
const FILE_TYPES: [&str; 7] = ["opus", "mp4", "pdf", "doc", "xls", "ppt", "stream"];

const RESOURCE: &str = "GET /open-apis/im/v1/messages/{message_id}/resources/{file_key}";
const WIKI: &str = "GET /open-apis/wiki/v2/spaces/get_node";
const DOCX: &str = "GET /open-apis/docx/v1/documents/{document_id}/raw_content";
const IMAGES: &str = "POST /open-apis/im/v1/images";
const FILES: &str = "POST /open-apis/im/v1/files";

/// One upload the fake accepted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Uploaded {
    /// `image` or `file`.
    pub kind: String,
    /// The `file_name` (files) or the part's filename (images).
    pub name: String,
    /// `file_type` (files) or `image_type` (images).
    pub file_type: String,
    pub size: usize,
    /// The key it answered.
    pub key: String,
}

/// A stored resource: `image` or `file`, its content type, its bytes.
type Resource = (String, String, Vec<u8>);
/// A bundle's child: sender open_id, msg_type, content.
type Child = (String, String, Value);
/// A multipart part: field name, filename, bytes.
type FormPart = (String, Option<String>, Vec<u8>);

/// What the fake serves of media, and what it was sent.
#[derive(Default)]
pub struct Media {
    /// (message id, key) → (`image` or `file`, content type, bytes).
    resources: Mutex<HashMap<(String, String), Resource>>,
    /// A bundle's id → its children: (sender open_id, msg_type, content).
    bundles: Mutex<HashMap<String, Vec<Child>>>,
    /// docx document id → its text.
    docs: Mutex<HashMap<String, String>>,
    /// wiki node token → (obj_type, obj_token, title).
    wiki: Mutex<HashMap<String, (String, String, String)>>,
    /// Docs and wiki nodes the app may not read.
    forbidden: Mutex<HashSet<String>>,
    /// Uploads accepted, in order.
    uploads: Mutex<Vec<Uploaded>>,
    /// Keys it issued for uploads (what an image or file message may carry).
    issued: Mutex<HashSet<String>>,
    /// Resource downloads asked for (refused ones included).
    pub resource_requests: AtomicUsize,
    /// Upload requests (refused ones included).
    pub upload_requests: AtomicUsize,
    /// Doc reads (wiki nodes and raw contents, refused ones included).
    pub doc_requests: AtomicUsize,
}

impl Media {
    /// Serves `bytes` as the image `key` of `message_id`.
    pub fn image(&self, message_id: &str, key: &str, bytes: Vec<u8>) {
        self.resource(message_id, key, "image", "image/png", bytes);
    }

    /// Serves `bytes` as the file `key` of `message_id`.
    pub fn file(&self, message_id: &str, key: &str, bytes: Vec<u8>) {
        self.resource(message_id, key, "file", "application/octet-stream", bytes);
    }

    fn resource(&self, message_id: &str, key: &str, kind: &str, ct: &str, bytes: Vec<u8>) {
        self.resources.lock().expect("lock").insert(
            (message_id.into(), key.into()),
            (kind.into(), ct.into(), bytes),
        );
    }

    /// Makes `message_id` a forwarded bundle of these (sender, text) messages.
    pub fn bundle(&self, message_id: &str, items: &[(&str, &str)]) {
        let items = items
            .iter()
            .map(|(who, text)| (who.to_string(), "text".to_string(), json!({"text": text})))
            .collect();
        self.bundles
            .lock()
            .expect("lock")
            .insert(message_id.into(), items);
    }

    /// A docx document with `text`.
    pub fn doc(&self, document_id: &str, text: &str) {
        self.docs
            .lock()
            .expect("lock")
            .insert(document_id.into(), text.into());
    }

    /// A wiki node pointing at an object.
    pub fn wiki_node(&self, token: &str, obj_type: &str, obj_token: &str, title: &str) {
        self.wiki.lock().expect("lock").insert(
            token.into(),
            (obj_type.into(), obj_token.into(), title.into()),
        );
    }

    /// A doc or wiki node the app may not read.
    pub fn forbid(&self, token: &str) {
        self.forbidden.lock().expect("lock").insert(token.into());
    }

    /// The uploads accepted so far.
    pub fn uploads(&self) -> Vec<Uploaded> {
        self.uploads.lock().expect("lock").clone()
    }

    /// Whether the fake issued this image or file key.
    pub fn issued(&self, key: &str) -> bool {
        self.issued.lock().expect("lock").contains(key)
    }

    /// The children of a bundle, as get-message items.
    pub(super) fn bundle_items(&self, message_id: &str) -> Option<Vec<Value>> {
        let bundles = self.bundles.lock().expect("lock");
        let children = bundles.get(message_id)?;
        let mut items = vec![json!({
            "message_id": message_id, "msg_type": "merge_forward", "deleted": false,
            "body": {"content": "Merged and Forwarded Message"},
            "sender": {"id": "ou_forwarder", "id_type": "open_id", "sender_type": "user"},
        })];
        items.extend(children.iter().enumerate().map(|(i, (who, t, content))| {
            json!({
                "message_id": format!("om_child_{i}"), "msg_type": t, "deleted": false,
                "upper_message_id": message_id,
                "body": {"content": content.to_string()},
                "sender": {"id": who, "id_type": "open_id", "sender_type": "user"},
            })
        }));
        Some(items)
    }
}

pub(super) async fn resource(
    State(s): State<Arc<FakeState>>,
    Path((id, key)): Path<(String, String)>,
    Query(q): Query<HashMap<String, String>>,
    uri: Uri,
    headers: HeaderMap,
) -> Response {
    s.media.resource_requests.fetch_add(1, Ordering::SeqCst);
    let recalled = s.targets_recalled(&id);
    if let Err(refused) = s.admit(RESOURCE, uri.path(), &headers) {
        return refused.into_response();
    }
    let Some(kind) = q.get("type").filter(|t| *t == "image" || *t == "file") else {
        return s
            .refuse(
                RESOURCE,
                StatusCode::BAD_REQUEST,
                234001,
                "Invalid request param.",
            )
            .into_response();
    };
    if recalled {
        let msg = "message has been recalled";
        return s
            .refuse(RESOURCE, StatusCode::BAD_REQUEST, 230011, msg)
            .into_response();
    }
    let found = s
        .media
        .resources
        .lock()
        .expect("lock")
        .get(&(id, key))
        .cloned();
    match found {
        Some((stored, ct, bytes)) if stored == *kind => {
            ([(header::CONTENT_TYPE, ct)], bytes).into_response()
        }
        _ => s
            .refuse(
                RESOURCE,
                StatusCode::BAD_REQUEST,
                234003,
                "File not in msg.",
            )
            .into_response(),
    }
}

pub(super) async fn wiki_node(
    State(s): State<Arc<FakeState>>,
    Query(q): Query<HashMap<String, String>>,
    uri: Uri,
    headers: HeaderMap,
) -> Response {
    s.media.doc_requests.fetch_add(1, Ordering::SeqCst);
    if let Err(refused) = s.admit(WIKI, uri.path(), &headers) {
        return refused.into_response();
    }
    let token = q.get("token").cloned().unwrap_or_default();
    if s.media.forbidden.lock().expect("lock").contains(&token) {
        let msg = "permission denied: wiki space permission denied";
        return s
            .refuse(WIKI, StatusCode::BAD_REQUEST, 131006, msg)
            .into_response();
    }
    let node = s.media.wiki.lock().expect("lock").get(&token).cloned();
    match node {
        Some((obj_type, obj_token, title)) => success(json!({"node": {
            "node_token": token, "obj_type": obj_type, "obj_token": obj_token, "title": title,
        }})),
        None => s
            .refuse(WIKI, StatusCode::BAD_REQUEST, 131005, "not found")
            .into_response(),
    }
}

pub(super) async fn docx_raw(
    State(s): State<Arc<FakeState>>,
    Path(id): Path<String>,
    uri: Uri,
    headers: HeaderMap,
) -> Response {
    s.media.doc_requests.fetch_add(1, Ordering::SeqCst);
    if let Err(refused) = s.admit(DOCX, uri.path(), &headers) {
        return refused.into_response();
    }
    if s.media.forbidden.lock().expect("lock").contains(&id) {
        return s
            .refuse(DOCX, StatusCode::FORBIDDEN, 1770032, "forbidden")
            .into_response();
    }
    let text = s.media.docs.lock().expect("lock").get(&id).cloned();
    match text {
        Some(content) => success(json!({"content": content})),
        None => s
            .refuse(DOCX, StatusCode::NOT_FOUND, 1770002, "not found")
            .into_response(),
    }
}

pub(super) async fn upload_image(
    State(s): State<Arc<FakeState>>,
    uri: Uri,
    headers: HeaderMap,
    raw: Bytes,
) -> Response {
    upload(&s, IMAGES, &uri, &headers, &raw).await
}

pub(super) async fn upload_file(
    State(s): State<Arc<FakeState>>,
    uri: Uri,
    headers: HeaderMap,
    raw: Bytes,
) -> Response {
    upload(&s, FILES, &uri, &headers, &raw).await
}

async fn upload(
    s: &FakeState,
    ep: &'static str,
    uri: &Uri,
    headers: &HeaderMap,
    raw: &Bytes,
) -> Response {
    s.media.upload_requests.fetch_add(1, Ordering::SeqCst);
    if let Err(refused) = s.admit(ep, uri.path(), headers) {
        return refused.into_response();
    }
    let invalid = || {
        s.refuse(
            ep,
            StatusCode::BAD_REQUEST,
            234001,
            "Invalid request param.",
        )
        .into_response()
    };
    let Some(parts) = form_parts(headers, raw).await else {
        return invalid();
    };
    let text = |n: &str| {
        parts
            .iter()
            .find(|p| p.0 == n)
            .map(|p| String::from_utf8_lossy(&p.2).to_string())
    };
    let image = ep == IMAGES;
    let (kind, file_field, type_field, max) = if image {
        ("image", "image", "image_type", IMAGE_MAX_BYTES)
    } else {
        ("file", "file", "file_type", FILE_MAX_BYTES)
    };
    let file_type = text(type_field).unwrap_or_default();
    let type_ok = if image {
        file_type == "message" || file_type == "avatar"
    } else {
        FILE_TYPES.contains(&file_type.as_str())
    };
    let name = if image {
        parts
            .iter()
            .find(|p| p.0 == "image")
            .and_then(|p| p.1.clone())
    } else {
        text("file_name")
    };
    let Some((_, filename, bytes)) = parts.iter().find(|p| p.0 == file_field) else {
        return invalid();
    };
    if !type_ok || name.as_deref().is_none_or(str::is_empty) {
        return invalid();
    }
    if bytes.is_empty() {
        return s
            .refuse(
                ep,
                StatusCode::BAD_REQUEST,
                234010,
                "File's size can't be 0.",
            )
            .into_response();
    }
    if bytes.len() > max {
        let msg = "The file size exceed the max value.";
        return s
            .refuse(ep, StatusCode::BAD_REQUEST, 234006, msg)
            .into_response();
    }
    let mut uploads = s.media.uploads.lock().expect("lock");
    let key = format!("{kind}_v3_fake_{}", uploads.len() + 1);
    uploads.push(Uploaded {
        kind: kind.into(),
        name: name.or_else(|| filename.clone()).unwrap_or_default(),
        file_type,
        size: bytes.len(),
        key: key.clone(),
    });
    s.media.issued.lock().expect("lock").insert(key.clone());
    let key_field = if image { "image_key" } else { "file_key" };
    success(json!({ key_field: key }))
}

/// The parts of a multipart body: (field name, filename, bytes). `None` when the body
/// is not `multipart/form-data` as Feishu expects it.
async fn form_parts(headers: &HeaderMap, raw: &Bytes) -> Option<Vec<FormPart>> {
    let ct = headers.get(header::CONTENT_TYPE)?.to_str().ok()?;
    let boundary = multipart::boundary(ct)?;
    let parts = multipart::parse(raw.clone(), &boundary).await.ok()?;
    Some(
        parts
            .into_iter()
            .map(|p| (p.name, p.filename, p.data.to_vec()))
            .collect(),
    )
}
