//! The `openai` agent backend: the turn goes to an OpenAI-compatible
//! `POST {base_url}/chat/completions` (OpenAI, Ollama, vLLM, llama.cpp, …) as a
//! conversation: the session's earlier turns as user/assistant messages, then the
//! assembled prompt as the last user message.
//!
//! With `stream = true` the answer is read as Server-Sent Events and the text so far is
//! published after every piece; otherwise it is `choices[0].message.content` of one
//! JSON answer. The whole turn is bounded by `timeout`. The API key is sent as a bearer
//! token and never appears in an error, a log line or `Debug` output.

use std::time::Duration;

use async_trait::async_trait;
use base64::{Engine, engine::general_purpose::STANDARD};
use secrecy::{ExposeSecret, SecretString};
use serde::Serialize;
use serde_json::Value;

use super::{Agent, AgentError, AgentTurn, Answer, Partial, Progress};

/// The longest piece of an error body quoted in an [`AgentError`], in characters.
const ERROR_SNIPPET_CHARS: usize = 200;

/// The most of an error body read to quote from it.
const ERROR_BODY_BYTES: usize = 64 * 1024;

/// The longest Server-Sent Events line accepted; a longer one fails the turn instead of
/// growing the buffer without bound.
const MAX_SSE_LINE_BYTES: usize = 4 * 1024 * 1024;

/// The `openai` backend of one profile. Built from `[profiles.agent]` by
/// [`super::backends`]; the fields are public so tests can build one directly.
#[derive(Debug)]
pub struct OpenAiAgent {
    /// HTTP client (without an overall timeout of its own: `timeout` bounds the turn).
    pub http: reqwest::Client,
    /// API base, e.g. `http://127.0.0.1:11434/v1`; `/chat/completions` is appended (a
    /// trailing slash is ignored).
    pub base_url: String,
    /// Model name.
    pub model: String,
    /// Bearer token; no `Authorization` header is sent without one (or with an empty one).
    pub api_key: Option<SecretString>,
    /// How long a whole turn may take, streamed or not.
    pub timeout: Duration,
    /// Ask for a streamed answer and publish it as it grows.
    pub stream: bool,
    /// Publish the model's streamed reasoning (`reasoning_content`) beside the answer:
    /// shown collapsed in the card, never part of the answer.
    pub show_thinking: bool,
}

/// One chat message of the request: its text, and the images that go with it (the
/// turn's own message only), which make its content a list of parts.
struct Message<'a> {
    role: &'static str,
    content: &'a str,
    images: &'a [(String, Vec<u8>)],
}

impl Serialize for Message<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut m = s.serialize_map(Some(2))?;
        m.serialize_entry("role", self.role)?;
        if self.images.is_empty() {
            m.serialize_entry("content", self.content)?;
        } else {
            let mut parts = vec![serde_json::json!({"type": "text", "text": self.content})];
            parts.extend(self.images.iter().map(|(mime, bytes)| {
                let url = format!("data:{mime};base64,{}", STANDARD.encode(bytes));
                serde_json::json!({"type": "image_url", "image_url": {"url": url}})
            }));
            m.serialize_entry("content", &parts)?;
        }
        m.end()
    }
}

/// The request body.
#[derive(Serialize)]
struct Request<'a> {
    model: &'a str,
    messages: Vec<Message<'a>>,
    stream: bool,
}

/// The conversation for one turn: each earlier turn as the feed segments it read (each
/// its own user message), a user and an assistant message, oldest first; then the feed
/// segments this turn is given (background from the group chat, each its own message),
/// then the prompt.
fn messages(turn: &AgentTurn) -> Vec<Message<'_>> {
    let mut out = Vec::with_capacity(turn.earlier.len() * 2 + turn.feed.len() + 1);
    for past in &turn.earlier {
        out.extend(past.feed.iter().map(|text| Message {
            role: "user",
            content: text,
            images: &[],
        }));
        out.push(Message {
            role: "user",
            content: &past.request,
            images: &[],
        });
        out.push(Message {
            role: "assistant",
            content: &past.output,
            images: &[],
        });
    }
    for segment in &turn.feed {
        out.push(Message {
            role: "user",
            content: &segment.text,
            images: &[],
        });
    }
    out.push(Message {
        role: "user",
        content: &turn.prompt,
        images: &turn.images,
    });
    out
}

impl OpenAiAgent {
    fn endpoint(&self) -> String {
        format!("{}/chat/completions", self.base_url.trim_end_matches('/'))
    }

    /// Server text fit for an error: the API key replaced, should the server echo it
    /// back, then cut to [`ERROR_SNIPPET_CHARS`].
    fn quote(&self, text: &str) -> String {
        cut(&self.redact(text))
    }

    /// Replaces the API key in `text`.
    fn redact(&self, text: &str) -> String {
        match self.api_key.as_ref().map(|k| k.expose_secret()) {
            Some(key) if !key.is_empty() && text.contains(key) => text.replace(key, "***"),
            _ => text.to_string(),
        }
    }

    /// The turn without the overall timeout.
    async fn complete(&self, turn: &AgentTurn, partial: &Partial) -> Result<String, AgentError> {
        let body = Request {
            model: &self.model,
            messages: messages(turn),
            stream: self.stream,
        };
        let mut request = self.http.post(self.endpoint()).json(&body);
        let key = self.api_key.as_ref().map(|k| k.expose_secret());
        if let Some(key) = key.filter(|k| !k.is_empty()) {
            // `bearer_auth` marks the header sensitive, so it is never logged either.
            request = request.bearer_auth(key);
        }
        let mut resp = request.send().await.map_err(AgentError::unreachable)?;
        let status = resp.status();
        if !status.is_success() {
            let body = read_capped(&mut resp, ERROR_BODY_BYTES).await;
            let detail = self.quote(&error_detail(&body));
            return Err(AgentError::Status {
                status,
                detail: (!detail.is_empty()).then_some(detail),
            });
        }
        // A server that ignores `"stream": true` answers plain JSON: take it as such.
        let is_sse = resp
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.trim_start().starts_with("text/event-stream"));
        if self.stream && is_sse {
            self.read_stream(resp, partial).await
        } else {
            let bytes = resp.bytes().await.map_err(AgentError::broke_off)?;
            let v: Value = serde_json::from_slice(&bytes).map_err(AgentError::NotJson)?;
            self.answer_of(&v)
        }
    }

    /// `choices[0].message.content` of a non-streamed answer.
    fn answer_of(&self, v: &Value) -> Result<String, AgentError> {
        if let Some(message) = error_message(v) {
            return Err(AgentError::AnsweredError(self.quote(&message)));
        }
        let Some(choice) = v["choices"].as_array().and_then(|c| c.first()) else {
            return Err(AgentError::MissingAnswer("any choices"));
        };
        match choice["message"]["content"].as_str() {
            Some(text) if !text.trim().is_empty() => Ok(text.to_string()),
            _ => Err(AgentError::EmptyAnswer),
        }
    }

    /// Reads a streamed answer to `[DONE]`, publishing the text as it grows.
    async fn read_stream(
        &self,
        mut resp: reqwest::Response,
        partial: &Partial,
    ) -> Result<String, AgentError> {
        let mut parser = SseParser::default();
        let mut shown = Progress::default();
        let mut done = false;
        'read: while let Some(bytes) = resp.chunk().await.map_err(AgentError::broke_off)? {
            let events = parser.push(&bytes)?;
            for data in events {
                if self.on_event(&data, &mut shown, partial)? {
                    done = true;
                    break 'read;
                }
            }
        }
        if !done && let Some(data) = parser.finish() {
            done = self.on_event(&data, &mut shown, partial)?;
        }
        let text = shown.text;
        match (done, text.trim().is_empty()) {
            (true, false) => Ok(text),
            (false, false) => {
                tracing::warn!(
                    chars = text.chars().count(),
                    "the answer stream ended without [DONE]; keeping the text received"
                );
                Ok(text)
            }
            (true, true) => Err(AgentError::EmptyStream),
            (false, true) => Err(AgentError::UnfinishedStream),
        }
    }

    /// Handles one event's data; `true` at `[DONE]`.
    fn on_event(
        &self,
        data: &str,
        shown: &mut Progress,
        partial: &Partial,
    ) -> Result<bool, AgentError> {
        let data = data.trim();
        if data == "[DONE]" {
            return Ok(true);
        }
        if data.is_empty() {
            return Ok(false);
        }
        let v: Value = serde_json::from_str(data).map_err(AgentError::MalformedEvent)?;
        if let Some(message) = error_message(&v) {
            return Err(AgentError::StreamedError(self.quote(&message)));
        }
        // Role-only, final and usage chunks carry no content.
        let delta = &v["choices"][0]["delta"];
        let mut grew = false;
        if let Some(piece) = delta["content"].as_str()
            && !piece.is_empty()
        {
            shown.text.push_str(piece);
            grew = true;
        }
        if self.show_thinking
            && let Some(piece) = delta["reasoning_content"].as_str()
            && !piece.is_empty()
        {
            shown.thinking.push_str(piece);
            grew = true;
        }
        if grew {
            partial.send_replace(shown.clone());
        }
        Ok(false)
    }
}

#[async_trait]
impl Agent for OpenAiAgent {
    async fn run(&self, turn: &AgentTurn, partial: &Partial) -> Result<Answer, AgentError> {
        match tokio::time::timeout(self.timeout, self.complete(turn, partial)).await {
            Ok(result) => result.map(Answer::from),
            Err(_) => Err(AgentError::Timeout(self.timeout)),
        }
    }

    fn streams(&self) -> bool {
        self.stream
    }
}

/// Up to `cap` bytes of the rest of a body, as text; a read error ends it early.
pub(crate) async fn read_capped(resp: &mut reqwest::Response, cap: usize) -> String {
    let mut bytes = Vec::new();
    while bytes.len() < cap {
        match resp.chunk().await {
            Ok(Some(chunk)) => bytes.extend_from_slice(&chunk),
            _ => break,
        }
    }
    bytes.truncate(cap);
    String::from_utf8_lossy(&bytes).into_owned()
}

/// `error.message` (or a string `error`) of an OpenAI-style error object.
fn error_message(v: &Value) -> Option<String> {
    match &v["error"] {
        Value::String(s) => Some(s.clone()),
        Value::Object(o) => Some(match o.get("message").and_then(Value::as_str) {
            Some(m) => m.to_string(),
            None => Value::Object(o.clone()).to_string(),
        }),
        _ => None,
    }
}

/// What an error body says: its `error.message` when it is such JSON, else the body.
pub(crate) fn error_detail(body: &str) -> String {
    serde_json::from_str::<Value>(body)
        .ok()
        .and_then(|v| error_message(&v))
        .unwrap_or_else(|| body.to_string())
}

/// `text` on one line, cut to [`ERROR_SNIPPET_CHARS`] characters (`…` marks a cut).
pub(crate) fn cut(text: &str) -> String {
    let text = text.split_whitespace().collect::<Vec<_>>().join(" ");
    match text.char_indices().nth(ERROR_SNIPPET_CHARS) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text,
    }
}

/// An incremental Server-Sent Events parser: bytes in, the `data` of each complete
/// event out.
///
/// Lines end in LF, CRLF or CR, which may fall on either side of a chunk boundary;
/// lines are decoded only once complete, so a UTF-8 character split across chunks is
/// whole again. Comment lines (`:`) and fields other than `data` are skipped; the
/// `data` lines of one event are joined with `\n`, and a blank line ends the event.
#[derive(Debug, Default)]
pub(crate) struct SseParser {
    /// Bytes not yet consumed: the start of an incomplete line.
    buf: Vec<u8>,
    /// How far `buf` has been searched for a line end.
    scanned: usize,
    /// The data of the event being read.
    data: String,
    /// The event being read has a `data` field.
    has_data: bool,
    /// Some line was read (a byte-order mark is dropped from the first).
    started: bool,
}

impl SseParser {
    /// Feeds bytes; returns the data of the events they complete, in order.
    pub(crate) fn push(&mut self, bytes: &[u8]) -> Result<Vec<String>, AgentError> {
        self.buf.extend_from_slice(bytes);
        let mut events = Vec::new();
        let mut start = 0;
        let mut at = self.scanned;
        loop {
            let Some(offset) = self.buf[at..]
                .iter()
                .position(|&b| b == b'\n' || b == b'\r')
            else {
                at = self.buf.len();
                break;
            };
            let end = at + offset;
            let after = match (self.buf[end], self.buf.get(end + 1)) {
                (b'\r', Some(b'\n')) => end + 2,
                // A CR at the very end may be the first half of a CRLF: wait.
                (b'\r', None) => {
                    at = end;
                    break;
                }
                _ => end + 1,
            };
            let line = String::from_utf8_lossy(&self.buf[start..end]).into_owned();
            self.line(&line, &mut events);
            start = after;
            at = after;
        }
        self.buf.drain(..start);
        self.scanned = at - start;
        if self.buf.len() > MAX_SSE_LINE_BYTES {
            return Err(AgentError::LineTooLong(MAX_SSE_LINE_BYTES));
        }
        Ok(events)
    }

    /// Ends the input: the data of an event the stream cut off before its blank line
    /// (a last `data: [DONE]` without one, say), if any.
    pub(crate) fn finish(&mut self) -> Option<String> {
        let mut events = Vec::new();
        let rest = std::mem::take(&mut self.buf);
        self.scanned = 0;
        if !rest.is_empty() {
            // What is left holds no line end, except perhaps a final CR.
            let rest = rest.strip_suffix(b"\r").unwrap_or(&rest);
            let line = String::from_utf8_lossy(rest).into_owned();
            self.line(&line, &mut events);
        }
        self.line("", &mut events);
        events.pop()
    }

    fn line(&mut self, line: &str, events: &mut Vec<String>) {
        let line = if self.started {
            line
        } else {
            self.started = true;
            line.strip_prefix('\u{feff}').unwrap_or(line)
        };
        if line.is_empty() {
            if self.has_data {
                let mut data = std::mem::take(&mut self.data);
                if data.ends_with('\n') {
                    data.pop();
                }
                events.push(data);
            }
            self.has_data = false;
            self.data.clear();
            return;
        }
        if line.starts_with(':') {
            return;
        }
        let (field, value) = match line.split_once(':') {
            Some((field, value)) => (field, value.strip_prefix(' ').unwrap_or(value)),
            None => (line, ""),
        };
        if field == "data" {
            self.data.push_str(value);
            self.data.push('\n');
            self.has_data = true;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::PastTurn;

    fn all(parser: &mut SseParser, pieces: &[&[u8]]) -> Vec<String> {
        let mut out = Vec::new();
        for piece in pieces {
            out.extend(parser.push(piece).expect("within limits"));
        }
        out.extend(parser.finish());
        out
    }

    const STREAM: &str = "data: {\"choices\":[{\"delta\":{\"role\":\"assistant\"}}]}\n\n\
                          data: {\"choices\":[{\"delta\":{\"content\":\"Hé\"}}]}\r\n\r\n\
                          : keep-alive\n\n\
                          data: {\"choices\":[{\"delta\":{\"content\":\"llo 你好\"}}]}\r\r\
                          data: [DONE]\n\n";

    fn expected() -> Vec<String> {
        vec![
            "{\"choices\":[{\"delta\":{\"role\":\"assistant\"}}]}".to_string(),
            "{\"choices\":[{\"delta\":{\"content\":\"Hé\"}}]}".to_string(),
            "{\"choices\":[{\"delta\":{\"content\":\"llo 你好\"}}]}".to_string(),
            "[DONE]".to_string(),
        ]
    }

    #[test]
    fn sse_events_survive_every_split_point() {
        let bytes = STREAM.as_bytes();
        assert_eq!(all(&mut SseParser::default(), &[bytes]), expected());
        for cut in 0..=bytes.len() {
            let (a, b) = bytes.split_at(cut);
            assert_eq!(
                all(&mut SseParser::default(), &[a, b]),
                expected(),
                "split at byte {cut}"
            );
        }
        let singles: Vec<&[u8]> = bytes.chunks(1).collect();
        assert_eq!(all(&mut SseParser::default(), &singles), expected());
    }

    #[test]
    fn sse_utf8_split_inside_a_character_is_whole_again() {
        let bytes = "data: 你好\n\n".as_bytes();
        // "你" is three bytes starting at 6: cut after its first and second byte.
        let mut parser = SseParser::default();
        assert!(parser.push(&bytes[..7]).expect("ok").is_empty());
        assert!(parser.push(&bytes[7..8]).expect("ok").is_empty());
        assert_eq!(parser.push(&bytes[8..]).expect("ok"), vec!["你好"]);
    }

    #[test]
    fn sse_crlf_split_between_cr_and_lf_is_one_line_end() {
        let mut parser = SseParser::default();
        assert!(parser.push(b"data: a\r").expect("ok").is_empty());
        // Had the CR been taken as a line end alone, the LF would be a blank line and
        // dispatch "a" here; the blank line comes only with the second CRLF.
        assert!(parser.push(b"\n").expect("ok").is_empty());
        assert_eq!(parser.push(b"\r\n").expect("ok"), vec!["a"]);
    }

    #[test]
    fn sse_comments_and_other_fields_are_skipped() {
        let text = b": hello\nevent: message\nid: 7\nretry: 10\ndata: x\n:\n\n: ping\n\n";
        assert_eq!(all(&mut SseParser::default(), &[text]), vec!["x"]);
    }

    #[test]
    fn sse_data_lines_join_and_space_is_optional() {
        let text = b"data:one\ndata: two\ndata\n\n";
        assert_eq!(all(&mut SseParser::default(), &[text]), vec!["one\ntwo\n"]);
    }

    #[test]
    fn sse_done_without_a_blank_line_is_kept_at_the_end() {
        let mut parser = SseParser::default();
        assert!(parser.push(b"data: [DONE]").expect("ok").is_empty());
        assert_eq!(parser.finish().as_deref(), Some("[DONE]"));
        let mut parser = SseParser::default();
        assert!(parser.push(b"data: [DONE]\r").expect("ok").is_empty());
        assert_eq!(parser.finish().as_deref(), Some("[DONE]"));
        assert_eq!(SseParser::default().finish(), None);
    }

    #[test]
    fn sse_byte_order_mark_is_dropped() {
        let text = "\u{feff}data: x\n\n".as_bytes();
        assert_eq!(all(&mut SseParser::default(), &[text]), vec!["x"]);
    }

    #[test]
    fn sse_endless_line_is_refused() {
        let mut parser = SseParser::default();
        let block = vec![b'a'; 1024 * 1024];
        let mut refused = None;
        for _ in 0..5 {
            if let Err(e) = parser.push(&block) {
                refused = Some(e);
                break;
            }
        }
        let err = refused.expect("refused");
        assert!(
            matches!(err, AgentError::LineTooLong(MAX_SSE_LINE_BYTES)),
            "{err:?}"
        );
        assert_eq!(
            err.to_string(),
            "agent failed: agent streamed a line longer than 4194304 bytes"
        );
    }

    fn turn(prompt: &str, earlier: Vec<PastTurn>) -> AgentTurn {
        AgentTurn {
            earlier,
            ..crate::agent::sample_turn(prompt)
        }
    }

    fn agent(key: Option<&str>) -> OpenAiAgent {
        OpenAiAgent {
            http: reqwest::Client::new(),
            base_url: "http://127.0.0.1:9/v1/".into(),
            model: "m".into(),
            api_key: key.map(SecretString::from),
            timeout: Duration::from_secs(5),
            stream: true,
            show_thinking: false,
        }
    }

    #[test]
    fn feed_segments_are_history_messages_between_the_earlier_turns_and_the_prompt() {
        let mut t = turn(
            "PROMPT",
            vec![PastTurn {
                feed: Vec::new(),
                request: "q1".into(),
                output: "a1".into(),
            }],
        );
        t.feed = vec![crate::agent::FeedSegment {
            segment_id: 7,
            items: 2,
            text: "Background: Alice: hi".into(),
            message_ids: vec!["om_1".into()],
            shared: false,
        }];
        let got: Vec<(&str, &str)> = messages(&t).iter().map(|m| (m.role, m.content)).collect();
        assert_eq!(
            got,
            [
                ("user", "q1"),
                ("assistant", "a1"),
                ("user", "Background: Alice: hi"),
                ("user", "PROMPT")
            ]
        );
    }

    #[test]
    fn images_become_image_url_parts_of_the_turns_own_message_only() {
        let mut t = turn(
            "PROMPT",
            vec![PastTurn {
                feed: Vec::new(),
                request: "q1".into(),
                output: "a1".into(),
            }],
        );
        t.images = vec![("image/png".into(), b"PNG".to_vec())];
        let body = serde_json::to_value(messages(&t)).expect("serializes");
        assert_eq!(
            body[0],
            serde_json::json!({"role": "user", "content": "q1"})
        );
        assert_eq!(
            body[2],
            serde_json::json!({"role": "user", "content": [
                {"type": "text", "text": "PROMPT"},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,UE5H"}},
            ]})
        );
    }

    #[test]
    fn earlier_turns_become_alternating_messages_before_the_prompt() {
        let t = turn(
            "PROMPT",
            vec![
                PastTurn {
                    feed: Vec::new(),
                    request: "q1".into(),
                    output: "a1".into(),
                },
                PastTurn {
                    feed: Vec::new(),
                    request: "q2".into(),
                    output: "a2".into(),
                },
            ],
        );
        let got: Vec<(&str, &str)> = messages(&t).iter().map(|m| (m.role, m.content)).collect();
        assert_eq!(
            got,
            vec![
                ("user", "q1"),
                ("assistant", "a1"),
                ("user", "q2"),
                ("assistant", "a2"),
                ("user", "PROMPT"),
            ]
        );
    }

    #[test]
    fn endpoint_ignores_a_trailing_slash() {
        assert_eq!(
            agent(None).endpoint(),
            "http://127.0.0.1:9/v1/chat/completions"
        );
    }

    #[test]
    fn error_detail_prefers_error_message_and_is_cut() {
        let a = agent(None);
        assert_eq!(
            a.quote(&error_detail(
                r#"{"error":{"message":"model  not\nfound","type":"x"}}"#
            )),
            "model not found"
        );
        assert_eq!(error_detail(r#"{"error":"busy"}"#), "busy");
        assert_eq!(error_detail("plain failure"), "plain failure");
        let long = a.quote(&"é".repeat(500));
        assert_eq!(long.chars().count(), ERROR_SNIPPET_CHARS + 1);
        assert!(long.ends_with('…'));
    }

    #[test]
    fn the_key_is_redacted_and_never_debug_printed() {
        let a = agent(Some("sk-very-secret"));
        assert_eq!(
            a.redact("bad key sk-very-secret given"),
            "bad key *** given"
        );
        assert!(!format!("{a:?}").contains("sk-very-secret"));
        // Redacted before the cut, so no prefix of the key survives at the edge.
        let text = format!("{}sk-very-secret", "x".repeat(ERROR_SNIPPET_CHARS - 5));
        assert!(!a.quote(&text).contains("sk-ve"), "{}", a.quote(&text));
    }

    #[test]
    fn stream_events_accumulate_and_publish() {
        let a = agent(None);
        let (tx, rx) = tokio::sync::watch::channel(Progress::default());
        let mut shown = Progress::default();
        for data in expected() {
            let done = a.on_event(&data, &mut shown, &tx).expect("valid");
            assert_eq!(done, data == "[DONE]");
        }
        assert_eq!(shown.text, "Héllo 你好");
        assert_eq!(rx.borrow().text, "Héllo 你好");
        let err = a
            .on_event("{not json", &mut shown, &tx)
            .expect_err("malformed");
        assert!(matches!(err, AgentError::MalformedEvent(_)), "{err:?}");
        assert!(
            std::error::Error::source(&err).is_some_and(|s| s.is::<serde_json::Error>()),
            "the parser's error is the cause"
        );
        assert!(err.to_string().contains("malformed JSON"), "{err}");
        let err = a
            .on_event(r#"{"error":{"message":"overloaded"}}"#, &mut shown, &tx)
            .expect_err("error event");
        assert!(matches!(err, AgentError::StreamedError(_)), "{err:?}");
        assert_eq!(
            err.to_string(),
            "agent failed: agent streamed an error: overloaded"
        );
    }

    #[test]
    fn reasoning_is_published_apart_from_the_answer_only_when_shown() {
        let chunks = [
            r#"{"choices":[{"delta":{"reasoning_content":"Let me think. "}}]}"#,
            r#"{"choices":[{"delta":{"reasoning_content":"Done."}}]}"#,
            r#"{"choices":[{"delta":{"content":"The answer."}}]}"#,
        ];
        for show in [false, true] {
            let a = OpenAiAgent {
                show_thinking: show,
                ..agent(None)
            };
            let (tx, rx) = tokio::sync::watch::channel(Progress::default());
            let mut shown = Progress::default();
            for c in chunks {
                a.on_event(c, &mut shown, &tx).expect("valid");
            }
            assert_eq!(shown.text, "The answer.");
            let thinking = if show { "Let me think. Done." } else { "" };
            assert_eq!(rx.borrow().thinking, thinking);
            assert_eq!(rx.borrow().text, "The answer.");
        }
    }

    #[test]
    fn non_streamed_answers_need_a_non_empty_choice() {
        let a = agent(None);
        let ok = serde_json::json!({"choices":[{"message":{"role":"assistant","content":"hi"}}]});
        assert_eq!(a.answer_of(&ok).expect("answer"), "hi");
        let none = serde_json::json!({"choices":[]});
        assert!(matches!(
            a.answer_of(&none),
            Err(AgentError::MissingAnswer("any choices"))
        ));
        let empty = serde_json::json!({"choices":[{"message":{"content":null}}]});
        assert!(matches!(a.answer_of(&empty), Err(AgentError::EmptyAnswer)));
        let refused = serde_json::json!({"error":{"message":"quota  exceeded"}});
        let err = a.answer_of(&refused).expect_err("an error object");
        assert!(matches!(err, AgentError::AnsweredError(_)), "{err:?}");
        assert_eq!(
            err.to_string(),
            "agent failed: agent answered an error: quota exceeded"
        );
    }
}
