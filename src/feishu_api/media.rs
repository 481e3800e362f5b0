//! What a turn reads of the media its messages carry, and what an agent sends back:
//! message resources (`GET im/v1/messages/{id}/resources/{key}?type=image|file`, scope
//! `im:resource`), a forwarded bundle's items (`GET im/v1/messages/{id}`), Feishu docs
//! (`wiki/v2/spaces/get_node` → `docx/v1/documents/{id}/raw_content`), and uploads
//! (`POST im/v1/images`, `POST im/v1/files`). Every call spends from the app's budget;
//! binary answers are read only up to a cap.

use serde::Deserialize;

pub use super::raw::{Answered, Fetched};
use super::{FeishuClient, OpenApiError, budget::Urgency, call::Call, error::decode};

const RESOURCE_ENDPOINT: &str = "GET /open-apis/im/v1/messages/{message_id}/resources/{file_key}";
const GET_MESSAGE_ENDPOINT: &str = "GET /open-apis/im/v1/messages/{message_id}";
const WIKI_NODE_ENDPOINT: &str = "GET /open-apis/wiki/v2/spaces/get_node";
const DOCX_RAW_ENDPOINT: &str = "GET /open-apis/docx/v1/documents/{document_id}/raw_content";
const IMAGE_UPLOAD_ENDPOINT: &str = "POST /open-apis/im/v1/images";
const FILE_UPLOAD_ENDPOINT: &str = "POST /open-apis/im/v1/files";

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
        self.resource_answer(message_id, key, kind, cap)
            .await?
            .read(RESOURCE_ENDPOINT, cap)
            .await
    }

    /// A message resource's answer, to be read as it arrives (a binary answer is handed
    /// over unread; one that is JSON is read up to `cap`).
    pub async fn resource_answer(
        &self,
        message_id: &str,
        key: &str,
        kind: &str,
        cap: usize,
    ) -> Result<Answered, OpenApiError> {
        let url = format!(
            "{}/open-apis/im/v1/messages/{message_id}/resources/{key}",
            self.base
        );
        self.raw(RESOURCE_ENDPOINT, cap, move |http, token| {
            http.get(&url).bearer_auth(token).query(&[("type", kind)])
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
                vec![("image_type", "message")],
                "image",
            ),
            Upload::File { file_type } => (
                FILE_UPLOAD_ENDPOINT,
                "files",
                vec![("file_type", file_type), ("file_name", name)],
                "file",
            ),
        };
        let url = format!("{}/open-apis/im/v1/{path}", self.base);
        let boundary = format!("fb{:032x}", rand::random::<u128>());
        let body = super::raw::multipart_form(&boundary, &fields, (file_field, name, bytes));
        let content_type = format!("multipart/form-data; boundary={boundary}");
        let answer = self
            .raw(endpoint, 64 * 1024, move |http, token| {
                http.post(&url)
                    .bearer_auth(token)
                    .header(reqwest::header::CONTENT_TYPE, &content_type)
                    .body(body.clone())
            })
            .await?
            .read(endpoint, 64 * 1024)
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
}
