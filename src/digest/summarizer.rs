//! The summarizer: one non-streamed call to an OpenAI-compatible
//! `POST {base_url}/chat/completions` per session, bounded by its timeout. The API key
//! is sent as a bearer token and never appears in an error or a log line.

use secrecy::ExposeSecret;
use serde_json::{Value, json};

use crate::{
    agent::openai::{cut, error_detail, read_capped},
    config::SummarizerConfig,
    store::DigestReason,
};

/// What the summarizer is asked to do.
pub const INSTRUCTIONS: &str = "You write the daily digest of one chat conversation. \
Summarize the transcript the user sends in 300 to 500 characters, in the language the \
conversation is written in. Keep what was decided, what is still open, who owns what, and \
any names, numbers and dates that matter. Answer with the summary only: plain text, no \
heading, no preamble.";

/// The most of an answer read.
const MAX_ANSWER_BYTES: usize = 1024 * 1024;

/// The longest summary kept, in characters (a model that runs on is cut).
pub const MAX_SUMMARY_CHARS: usize = 2_000;

/// Why a summary was not had: the digest's reason and what to tell a person.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failed {
    pub reason: DigestReason,
    pub detail: String,
}

/// The configured summarizer.
#[derive(Debug, Clone)]
pub struct Summarizer {
    http: reqwest::Client,
    config: SummarizerConfig,
}

impl Summarizer {
    /// Over `http` (which has no overall timeout: each call bounds itself).
    pub fn new(http: reqwest::Client, config: SummarizerConfig) -> Self {
        Self { http, config }
    }

    /// Whether there is a key to call with.
    pub fn has_key(&self) -> bool {
        self.config
            .api_key
            .as_ref()
            .is_some_and(|k| !k.expose_secret().is_empty())
    }

    /// The summary of `transcript`: non-blank, at most [`MAX_SUMMARY_CHARS`].
    pub async fn summarize(&self, transcript: &str) -> Result<String, Failed> {
        let call = self.call(transcript);
        match tokio::time::timeout(self.config.timeout(), call).await {
            Err(_) => Err(Failed {
                reason: DigestReason::SummarizerTimeout,
                detail: format!(
                    "the summarizer did not answer within {} s",
                    self.config.timeout_secs
                ),
            }),
            Ok(Err(detail)) => Err(Failed {
                reason: DigestReason::SummarizerError,
                detail: self.redact(&detail),
            }),
            Ok(Ok(text)) if text.trim().is_empty() => Err(Failed {
                reason: DigestReason::EmptySummary,
                detail: "the summarizer answered an empty summary".into(),
            }),
            Ok(Ok(text)) => Ok(cap(text.trim())),
        }
    }

    async fn call(&self, transcript: &str) -> Result<String, String> {
        let url = format!(
            "{}/chat/completions",
            self.config.base_url.trim_end_matches('/')
        );
        let body = json!({
            "model": self.config.model,
            "stream": false,
            "messages": [
                {"role": "system", "content": INSTRUCTIONS},
                {"role": "user", "content": transcript},
            ],
        });
        let mut request = self.http.post(url).json(&body);
        if let Some(key) = self.config.api_key.as_ref().map(|k| k.expose_secret()) {
            request = request.bearer_auth(key);
        }
        let mut resp = request
            .send()
            .await
            .map_err(|e| format!("the summarizer could not be reached: {}", e.without_url()))?;
        let status = resp.status();
        let text = read_capped(&mut resp, MAX_ANSWER_BYTES).await;
        if !status.is_success() {
            let detail = cut(&error_detail(&text));
            return Err(match detail.is_empty() {
                true => format!("the summarizer answered {status}"),
                false => format!("the summarizer answered {status}: {detail}"),
            });
        }
        let v: Value = serde_json::from_str(&text)
            .map_err(|_| "the summarizer's answer is not JSON".to_string())?;
        v["choices"][0]["message"]["content"]
            .as_str()
            .map(str::to_string)
            .ok_or_else(|| "the summarizer's answer has no choices[0].message.content".into())
    }

    /// Replaces the API key in `text`, should the server echo it back.
    fn redact(&self, text: &str) -> String {
        match self.config.api_key.as_ref().map(|k| k.expose_secret()) {
            Some(key) if !key.is_empty() => text.replace(key, "***"),
            _ => text.to_string(),
        }
    }
}

fn cap(text: &str) -> String {
    match text.char_indices().nth(MAX_SUMMARY_CHARS) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_runaway_summary_is_cut() {
        assert_eq!(cap("short"), "short");
        let long = cap(&"字".repeat(MAX_SUMMARY_CHARS + 5));
        assert_eq!(long.chars().count(), MAX_SUMMARY_CHARS + 1);
        assert!(long.ends_with('…'));
    }
}
