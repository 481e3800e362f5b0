//! Open API calls whose success may be bytes rather than JSON (a message resource), or
//! whose request is not JSON (a multipart upload): room from the app's budget, the
//! tenant token, a few attempts for transport failures, server errors and a stale token,
//! a rate limit waited out (what Feishu says, at most 30 s) within those attempts. A
//! binary answer is handed over unread, to be read up to a cap or streamed on.

use std::time::Duration;

use secrecy::ExposeSecret;
use serde::Deserialize;

use super::{
    FeishuClient, OpenApiError,
    budget::Urgency,
    call::reset_after,
    codes::{self, RATE_LIMITED, TOKEN_INVALID},
};

/// Attempts of one call (transport failures, server errors, a stale token).
const ATTEMPTS: u32 = 3;

/// The most bytes of an Open API answer that is JSON (a refusal, an upload's keys).
const ANSWER_CAP: usize = 64 * 1024;

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

/// A successful answer: read already (it was JSON), or open to be read.
pub enum Answered {
    /// An answer read whole (up to the cap asked for).
    Read(Fetched),
    /// A binary answer, unread, with its content type.
    Open(reqwest::Response, Option<String>),
}

impl Answered {
    /// The answer's bytes, at most `cap` of them.
    pub async fn read(self, endpoint: &'static str, cap: usize) -> Result<Fetched, OpenApiError> {
        match self {
            Self::Read(mut f) => {
                if f.bytes.len() > cap {
                    f.bytes.truncate(cap);
                    f.cut = true;
                }
                Ok(f)
            }
            Self::Open(resp, content_type) => {
                let mut f = read_capped(resp, cap)
                    .await
                    .map_err(|e| OpenApiError::transport(endpoint, e))?;
                f.content_type = content_type;
                Ok(f)
            }
        }
    }
}

impl FeishuClient {
    /// Makes the request `make` builds (with the tenant token) until it succeeds or
    /// cannot; a JSON answer (or an error page) is read up to `json_cap` bytes and
    /// checked for Feishu's code, a binary one is handed over unread.
    pub(super) async fn raw(
        &self,
        endpoint: &'static str,
        json_cap: usize,
        make: impl Fn(&reqwest::Client, &str) -> reqwest::RequestBuilder,
    ) -> Result<Answered, OpenApiError> {
        let mut last = None;
        for attempt in 0..ATTEMPTS {
            if attempt > 0 {
                tokio::time::sleep(Duration::from_millis(300 << attempt)).await;
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
            let reset = reset_after(resp.headers());
            let content_type = resp
                .headers()
                .get(reqwest::header::CONTENT_TYPE)
                .and_then(|v| v.to_str().ok())
                .map(str::to_string);
            let json = content_type
                .as_deref()
                .is_some_and(|t| t.starts_with("application/json"));
            if !json && status.is_success() {
                return Ok(Answered::Open(resp, content_type));
            }
            // An Open API answer (a refusal, an upload's keys), or a resource that
            // happens to be JSON: read enough to tell.
            let limit = if status.is_success() {
                json_cap.max(ANSWER_CAP)
            } else {
                ANSWER_CAP
            };
            let mut got = match read_capped(resp, limit).await {
                Ok(f) => f,
                Err(e) => {
                    last = Some(OpenApiError::transport(endpoint, e));
                    continue;
                }
            };
            match refusal(endpoint, status, reset, &got.bytes) {
                None => {
                    got.content_type = content_type;
                    return Ok(Answered::Read(got));
                }
                Some(Refused::Retry(e)) => {
                    if e.is(&TOKEN_INVALID) {
                        self.forget_token();
                    }
                    if let OpenApiError::RateLimited {
                        reset: Some(reset), ..
                    } = &e
                    {
                        tokio::time::sleep((*reset).min(Duration::from_secs(30))).await;
                    }
                    last = Some(e);
                }
                Some(Refused::Final(e)) => return Err(e),
            }
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

/// Sorts out an answer that is JSON or an error status; `None` for a success: code 0,
/// or JSON without an Open API code (the resource itself: a `.json` file, say).
fn refusal(
    endpoint: &'static str,
    status: reqwest::StatusCode,
    reset: Option<Duration>,
    body: &[u8],
) -> Option<Refused> {
    #[derive(Deserialize)]
    struct Coded {
        code: i64,
        #[serde(default)]
        msg: String,
    }
    let coded: Option<Coded> = serde_json::from_slice(body).ok();
    if coded.is_none() && status.is_success() {
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
            // What `x-ogw-ratelimit-reset` says, else a second.
            reset: Some(reset.unwrap_or(Duration::from_secs(1))),
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
pub fn multipart_form(
    boundary: &str,
    fields: &[(&str, &str)],
    file: (&str, &str, &[u8]),
) -> Vec<u8> {
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
        let body = multipart_form(
            "B",
            &[("image_type", "message")],
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
        assert!(refusal("e", reqwest::StatusCode::OK, None, ok).is_none());
        let gone = br#"{"code":234003,"msg":"File not in msg."}"#;
        assert!(matches!(
            refusal("e", reqwest::StatusCode::BAD_REQUEST, None, gone),
            Some(Refused::Final(OpenApiError::Api { code: 234003, .. }))
        ));
        assert!(matches!(
            refusal("e", reqwest::StatusCode::BAD_GATEWAY, None, b"<html>"),
            Some(Refused::Retry(_))
        ));
        // A JSON file downloaded is not an answer.
        assert!(refusal("e", reqwest::StatusCode::OK, None, br#"{"level":"error"}"#).is_none());
    }
}
