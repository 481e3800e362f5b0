//! What a turn reads of the media its messages carry, and what an agent sends back:
//! message resources (`GET im/v1/messages/{id}/resources/{key}?type=image|file`, scope
//! `im:resource`), a forwarded bundle's items (`GET im/v1/messages/{id}`), Feishu docs
//! (`wiki/v2/spaces/get_node` → `docx/v1/documents/{id}/raw_content`), and uploads
//! (`POST im/v1/images`, `POST im/v1/files`). Every call spends from the app's budget;
//! binary answers are read only up to a cap.

use secrecy::ExposeSecret;
use serde::Deserialize;

use super::{
    FeishuClient, OpenApiError,
    budget::Urgency,
    call::Call,
    codes::{self, RATE_LIMITED, TOKEN_INVALID},
    error::decode,
};

const RESOURCE_ENDPOINT: &str = "GET /open-apis/im/v1/messages/{message_id}/resources/{file_key}";
const GET_MESSAGE_ENDPOINT: &str = "GET /open-apis/im/v1/messages/{message_id}";
const WIKI_NODE_ENDPOINT: &str = "GET /open-apis/wiki/v2/spaces/get_node";
const DOCX_RAW_ENDPOINT: &str = "GET /open-apis/docx/v1/documents/{document_id}/raw_content";
const IMAGE_UPLOAD_ENDPOINT: &str = "POST /open-apis/im/v1/images";
const FILE_UPLOAD_ENDPOINT: &str = "POST /open-apis/im/v1/files";

/// Attempts of one binary call (transport failures, server errors, a stale token).
const RAW_ATTEMPTS: u32 = 3;

/// Bytes read back from the Open API.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fetched {
    /// The bytes, at most the cap asked for.
    pub bytes: Vec<u8>,
    /// The answer's `Content-Type`.
    pub content_type: Option<String>,
    /// The whole size, when the answer said it (`Content-Length`) or it was read whole.
    pub size: Option<u64>,
    /// More bytes followed than the cap let in.
    pub cut: bool,
}

/// One message of a forwarded bundle.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BundleItem {
    /// The sender's id (open_id or app id).
    pub sender: String,
    /// `msg_type`.
    pub msg_type: String,
    /// `body.content`, as Feishu wrote it.
    pub content: String,
}

/// A doc as read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DocText {
    /// The docx document id read.
    pub document_id: String,
    /// Its title, when a wiki node named one.
    pub title: Option<String>,
    /// Its plain text.
    pub text: String,
}

#[derive(Deserialize)]
struct Items {
    #[serde(default)]
    data: Option<ItemsData>,
}

#[derive(Deserialize)]
struct ItemsData {
    #[serde(default)]
    items: Vec<Item>,
}

#[derive(Deserialize)]
struct Item {
    #[serde(default)]
    message_id: String,
    #[serde(default)]
    msg_type: String,
    #[serde(default)]
    upper_message_id: Option<String>,
    #[serde(default)]
    sender: Option<ItemSender>,
    #[serde(default)]
    body: Option<ItemBody>,
}

#[derive(Deserialize)]
struct ItemSender {
    #[serde(default)]
    id: String,
}

#[derive(Deserialize)]
struct ItemBody {
    #[serde(default)]
    content: String,
}

#[derive(Deserialize)]
struct NodeAnswer {
    #[serde(default)]
    data: Option<NodeData>,
}

#[derive(Deserialize)]
struct NodeData {
    #[serde(default)]
    node: Option<Node>,
}

#[derive(Deserialize)]
struct Node {
    #[serde(default)]
    obj_type: String,
    #[serde(default)]
    obj_token: String,
    #[serde(default)]
    title: Option<String>,
}

#[derive(Deserialize)]
struct RawAnswer {
    #[serde(default)]
    data: Option<RawData>,
}

#[derive(Deserialize)]
struct RawData {
    #[serde(default)]
    content: String,
}

#[derive(Deserialize)]
struct UploadAnswer {
    #[serde(default)]
    data: Option<UploadData>,
}

#[derive(Deserialize)]
struct UploadData {
    #[serde(default)]
    image_key: Option<String>,
    #[serde(default)]
    file_key: Option<String>,
}

/// What a doc link turned out to be, when it is not a docx the bot can read.
#[derive(Debug, thiserror::Error)]
pub enum DocError {
    /// The wiki node is another kind of object (a sheet, a bitable, a file).
    #[error("the wiki node is a {0}, not a docx document")]
    NotDocx(String),
    /// The Open API refused or failed.
    #[error(transparent)]
    Api(#[from] OpenApiError),
}

/// What an upload is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Upload<'a> {
    /// An image (`im/v1/images`, `image_type=message`).
    Image,
    /// A file (`im/v1/files`) of `file_type` (`opus`, `mp4`, `pdf`, `doc`, `xls`, `ppt`,
    /// `stream`).
    File { file_type: &'a str },
}

impl FeishuClient {
    /// A message resource (`type` `image` or `file`), at most `cap` bytes of it.
    pub async fn resource(
        &self,
        message_id: &str,
        key: &str,
        kind: &str,
        cap: usize,
    ) -> Result<Fetched, OpenApiError> {
        let url = format!(
            "{}/open-apis/im/v1/messages/{message_id}/resources/{key}",
            self.base
        );
        let kind = kind.to_string();
        self.raw(RESOURCE_ENDPOINT, cap, move |http, token| {
            http.get(&url)
                .bearer_auth(token)
                .query(&[("type", kind.as_str())])
        })
        .await
    }

    /// The messages of a forwarded bundle (`GET im/v1/messages/{id}` answers the bundle
    /// itself, then its children), children only, in order.
    pub async fn bundle(&self, message_id: &str) -> Result<Vec<BundleItem>, OpenApiError> {
        let call = Call {
            method: reqwest::Method::GET,
            endpoint: GET_MESSAGE_ENDPOINT,
            url: format!("{}/open-apis/im/v1/messages/{message_id}", self.base),
            query: &[("user_id_type", "open_id")],
            urgency: Urgency::Required,
        };
        let answer: Items = self.call(call, || None).await?;
        let items = answer.data.map(|d| d.items).unwrap_or_default();
        Ok(items
            .into_iter()
            .filter(|i| i.message_id != message_id || i.upper_message_id.is_some())
            .map(|i| BundleItem {
                sender: i.sender.map(|s| s.id).unwrap_or_default(),
                msg_type: i.msg_type,
                content: i.body.map(|b| b.content).unwrap_or_default(),
            })
            .collect())
    }

    /// A docx document's plain text; a wiki node is looked up first.
    pub async fn doc_text(&self, wiki: bool, token: &str) -> Result<DocText, DocError> {
        let (document_id, title) = if wiki {
            let call = Call {
                method: reqwest::Method::GET,
                endpoint: WIKI_NODE_ENDPOINT,
                url: format!("{}/open-apis/wiki/v2/spaces/get_node", self.base),
                query: &[("token", token)],
                urgency: Urgency::Required,
            };
            let answer: NodeAnswer = self.call(call, || None).await?;
            let node = answer
                .data
                .and_then(|d| d.node)
                .ok_or(OpenApiError::Missing {
                    endpoint: WIKI_NODE_ENDPOINT,
                    missing: "data.node",
                })?;
            if node.obj_type != "docx" {
                return Err(DocError::NotDocx(node.obj_type));
            }
            (node.obj_token, node.title)
        } else {
            (token.to_string(), None)
        };
        let call = Call {
            method: reqwest::Method::GET,
            endpoint: DOCX_RAW_ENDPOINT,
            url: format!(
                "{}/open-apis/docx/v1/documents/{document_id}/raw_content",
                self.base
            ),
            query: &[],
            urgency: Urgency::Required,
        };
        let answer: RawAnswer = self.call(call, || None).await?;
        Ok(DocText {
            document_id,
            title,
            text: answer.data.map(|d| d.content).unwrap_or_default(),
        })
    }

    /// Uploads `bytes` named `name`; returns the `image_key` or `file_key`.
    pub async fn upload(
        &self,
        what: Upload<'_>,
        name: &str,
        bytes: &[u8],
    ) -> Result<String, OpenApiError> {
        let (endpoint, path, fields, file_field) = match what {
            Upload::Image => (
                IMAGE_UPLOAD_ENDPOINT,
                "images",
                vec![("image_type", "message".to_string())],
                "image",
            ),
            Upload::File { file_type } => (
                FILE_UPLOAD_ENDPOINT,
                "files",
                vec![
                    ("file_type", file_type.to_string()),
                    ("file_name", name.to_string()),
                ],
                "file",
            ),
        };
        let url = format!("{}/open-apis/im/v1/{path}", self.base);
        let boundary = format!("fb{:032x}", rand::random::<u128>());
        let body = multipart(&boundary, &fields, (file_field, name, bytes));
        let content_type = format!("multipart/form-data; boundary={boundary}");
        let answer = self
            .raw(endpoint, 64 * 1024, move |http, token| {
                http.post(&url)
                    .bearer_auth(token)
                    .header(reqwest::header::CONTENT_TYPE, &content_type)
                    .body(body.clone())
            })
            .await?;
        let decoded: UploadAnswer = decode(endpoint, &answer.bytes)?;
        decoded
            .data
            .and_then(|d| d.image_key.or(d.file_key))
            .filter(|k| !k.is_empty())
            .ok_or(OpenApiError::Missing {
                endpoint,
                missing: "data.image_key or data.file_key",
            })
    }

    /// One call whose success may be bytes rather than JSON: room from the budget, the
    /// tenant token, a few attempts for transport failures, server errors and a stale
    /// token; a rate limit waits what Feishu says (at most 30 s) within those attempts.
    async fn raw(
        &self,
        endpoint: &'static str,
        cap: usize,
        make: impl Fn(&reqwest::Client, &str) -> reqwest::RequestBuilder,
    ) -> Result<Fetched, OpenApiError> {
        let mut last = None;
        for attempt in 0..RAW_ATTEMPTS {
            if attempt > 0 {
                let wait = std::time::Duration::from_millis(300 << attempt);
                tokio::time::sleep(wait).await;
            }
            let token = self.tenant_token().await?;
            if !self.budget.take(Urgency::Required).await {
                return Err(OpenApiError::Deferred);
            }
            let resp = match make(&self.http, token.expose_secret()).send().await {
                Ok(r) => r,
                Err(e) => {
                    last = Some(OpenApiError::transport(endpoint, e));
                    continue;
                }
            };
            let status = resp.status();
            let content_type = resp
                .headers()
                .get(reqwest::header::CONTENT_TYPE)
                .and_then(|v| v.to_str().ok())
                .map(str::to_string);
            let json = content_type
                .as_deref()
                .is_some_and(|t| t.starts_with("application/json"));
            if json || !status.is_success() {
                // An Open API answer (a refusal, an upload's keys), or a resource that
                // happens to be JSON: read enough to tell.
                let limit = if status.is_success() {
                    cap.max(64 * 1024)
                } else {
                    64 * 1024
                };
                let mut got = match read_capped(resp, limit).await {
                    Ok(f) => f,
                    Err(e) => {
                        last = Some(OpenApiError::transport(endpoint, e));
                        continue;
                    }
                };
                match refusal(endpoint, status, &got.bytes) {
                    None => {
                        if got.bytes.len() > cap {
                            got.bytes.truncate(cap);
                            got.cut = true;
                        }
                        got.content_type = content_type;
                        return Ok(got);
                    }
                    Some(Refused::Retry(e)) => {
                        if e.is(&TOKEN_INVALID) {
                            self.forget_token();
                        }
                        if let OpenApiError::RateLimited {
                            reset: Some(reset), ..
                        } = &e
                        {
                            tokio::time::sleep((*reset).min(std::time::Duration::from_secs(30)))
                                .await;
                        }
                        last = Some(e);
                        continue;
                    }
                    Some(Refused::Final(e)) => return Err(e),
                }
            }
            return match read_capped(resp, cap).await {
                Ok(mut f) => {
                    f.content_type = content_type;
                    Ok(f)
                }
                Err(e) => Err(OpenApiError::transport(endpoint, e)),
            };
        }
        Err(last.unwrap_or(OpenApiError::Status {
            endpoint,
            status: 503,
        }))
    }
}

/// Why a non-binary answer is no success.
enum Refused {
    /// Another attempt may do better.
    Retry(OpenApiError),
    /// It will not.
    Final(OpenApiError),
}

/// Sorts out an answer that is JSON or an error status; `None` for a code-0 success.
fn refusal(endpoint: &'static str, status: reqwest::StatusCode, body: &[u8]) -> Option<Refused> {
    #[derive(Deserialize)]
    struct Coded {
        code: i64,
        #[serde(default)]
        msg: String,
    }
    let coded: Option<Coded> = serde_json::from_slice(body).ok();
    if coded.is_none() && status.is_success() {
        // No Open API code: the resource itself (a `.json` file, say).
        return None;
    }
    let Some(coded) = coded else {
        let e = OpenApiError::Status {
            endpoint,
            status: status.as_u16(),
        };
        return Some(if status.is_server_error() {
            Refused::Retry(e)
        } else {
            Refused::Final(e)
        });
    };
    if coded.code == 0 && status.is_success() {
        return None;
    }
    if status.as_u16() == 429 || codes::is(&RATE_LIMITED, coded.code) {
        return Some(Refused::Retry(OpenApiError::RateLimited {
            code: coded.code,
            reset: Some(std::time::Duration::from_secs(1)),
        }));
    }
    let e = OpenApiError::Api {
        code: coded.code,
        msg: coded.msg,
    };
    if codes::is(&TOKEN_INVALID, coded.code) || status.is_server_error() {
        Some(Refused::Retry(e))
    } else {
        Some(Refused::Final(e))
    }
}

/// Reads at most `cap` bytes of an answer, noting whether more followed.
async fn read_capped(mut resp: reqwest::Response, cap: usize) -> Result<Fetched, reqwest::Error> {
    let size = resp.content_length();
    let mut bytes = Vec::new();
    let mut cut = false;
    while let Some(chunk) = resp.chunk().await? {
        let room = cap.saturating_sub(bytes.len());
        if chunk.len() > room {
            bytes.extend_from_slice(&chunk[..room]);
            cut = true;
            break;
        }
        bytes.extend_from_slice(&chunk);
    }
    Ok(Fetched {
        size: size.or((!cut).then_some(bytes.len() as u64)),
        bytes,
        content_type: None,
        cut,
    })
}

/// A `multipart/form-data` body: the text fields, then the file.
fn multipart(boundary: &str, fields: &[(&str, String)], file: (&str, &str, &[u8])) -> Vec<u8> {
    let mut body = Vec::with_capacity(file.2.len() + 512);
    for (name, value) in fields {
        body.extend_from_slice(
            format!(
                "--{boundary}\r\nContent-Disposition: form-data; name=\"{name}\"\r\n\r\n{value}\r\n"
            )
            .as_bytes(),
        );
    }
    let (field, name, bytes) = file;
    let name = name.replace(['"', '\r', '\n'], "_");
    body.extend_from_slice(
        format!(
            "--{boundary}\r\nContent-Disposition: form-data; name=\"{field}\"; filename=\"{name}\"\r\n\
             Content-Type: application/octet-stream\r\n\r\n"
        )
        .as_bytes(),
    );
    body.extend_from_slice(bytes);
    body.extend_from_slice(format!("\r\n--{boundary}--\r\n").as_bytes());
    body
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_multipart_body_has_its_fields_then_its_file() {
        let body = multipart(
            "B",
            &[("image_type", "message".into())],
            ("image", "a\"b.png", b"PNG"),
        );
        let text = String::from_utf8_lossy(&body);
        assert!(text.starts_with(
            "--B\r\nContent-Disposition: form-data; name=\"image_type\"\r\n\r\nmessage\r\n"
        ));
        assert!(text.contains("filename=\"a_b.png\""), "{text}");
        assert!(text.ends_with("PNG\r\n--B--\r\n"), "{text}");
    }

    #[test]
    fn refusals_are_sorted_by_code() {
        let ok = br#"{"code":0,"msg":"ok"}"#;
        assert!(refusal("e", reqwest::StatusCode::OK, ok).is_none());
        let gone = br#"{"code":234003,"msg":"File not in msg."}"#;
        assert!(matches!(
            refusal("e", reqwest::StatusCode::BAD_REQUEST, gone),
            Some(Refused::Final(OpenApiError::Api { code: 234003, .. }))
        ));
        assert!(matches!(
            refusal("e", reqwest::StatusCode::BAD_GATEWAY, b"<html>"),
            Some(Refused::Retry(_))
        ));
        // A JSON file downloaded is not an answer.
        assert!(refusal("e", reqwest::StatusCode::OK, br#"{"level":"error"}"#).is_none());
    }
}
