//! ACKs in (protocol note §5 "Response (ACK) frame"): each is matched to the pushed
//! frame it echoes and checked field by field.

use base64::{Engine, engine::general_purpose::STANDARD};
use serde_json::Value;

use super::{LongConnState, frame::Frame};

/// An ACK the client sent for a pushed message.
#[derive(Debug, Clone, PartialEq)]
pub struct Ack {
    /// The connection (1-based) it came on.
    pub connection: usize,
    /// Its SeqID: that of the fragment it echoes.
    pub seq_id: u64,
    /// Its LogID.
    pub log_id: u64,
    /// Its service.
    pub service: i32,
    /// Its method.
    pub method: i32,
    /// All its headers, in order (the echoed ones plus `biz_rt`).
    pub headers: Vec<(String, String)>,
    /// The payload's `code` (200 success, 500 handler failure); 0 when absent.
    pub code: i64,
    /// The payload's `data`, base64-decoded and parsed as JSON.
    pub data: Option<Value>,
    /// The payload bytes as sent.
    pub raw_payload: Vec<u8>,
}

impl Ack {
    /// The value of header `key`.
    pub fn header(&self, key: &str) -> Option<&str> {
        let found = self.headers.iter().find(|(k, _)| k == key);
        found.map(|(_, v)| v.as_str())
    }
}

/// Matches and checks a data frame from the client on connection `n`: an ACK.
pub(super) fn ack_received(s: &LongConnState, n: usize, f: Frame) {
    let seq = f.seq_id;
    let wrong = s.update(|i| {
        let Some(&m) = i.push.by_seq.get(&seq) else {
            return vec![format!("an ACK for SeqID {seq}, which was never pushed")];
        };
        let msg = &mut i.push.messages[m];
        if msg.conn != n {
            return vec![format!(
                "an ACK for SeqID {seq}, pushed on connection {}",
                msg.conn
            )];
        }
        if msg.ack.is_some() {
            return vec![format!(
                "a second ACK for message {} (SeqID {seq}); §5: exactly one per message",
                msg.message_id
            )];
        }
        let mut wrong = echo_errors(&msg.frames[&seq], &f);
        if !msg.complete {
            wrong.push(format!(
                "an ACK for {}, whose fragments never all came",
                msg.message_id
            ));
        }
        let raw_payload = f.payload.clone().unwrap_or_default();
        let (code, data) = parse_payload(&raw_payload, &mut wrong);
        msg.ack = Some(Ack {
            connection: n,
            seq_id: seq,
            log_id: f.log_id,
            service: f.service,
            method: f.method,
            headers: f.header_pairs(),
            code,
            data,
            raw_payload,
        });
        wrong
    });
    for w in wrong {
        s.violation(format!("conn {n}: SeqID {seq}: {w}"));
    }
}

/// What the ACK fails to echo of the pushed frame (§5 step 1).
fn echo_errors(pushed: &Frame, ack: &Frame) -> Vec<String> {
    let mut wrong = Vec::new();
    let fields: [(&str, i128, i128); 3] = [
        ("LogID", pushed.log_id.into(), ack.log_id.into()),
        ("service", pushed.service.into(), ack.service.into()),
        ("method", pushed.method.into(), ack.method.into()),
    ];
    let mismatched = fields.iter().filter(|(_, want, got)| want != got);
    wrong.extend(mismatched.map(|(name, want, got)| format!("{name} {got}, pushed {want}")));
    for h in &pushed.headers {
        if !ack.headers.contains(h) {
            wrong.push(format!("header {}={} not echoed", h.key, h.value));
        }
    }
    let biz_rt: Vec<_> = ack.headers.iter().filter(|h| h.key == "biz_rt").collect();
    match biz_rt.as_slice() {
        [one] if one.value.parse::<u64>().is_ok() => {}
        [one] => wrong.push(format!("biz_rt {:?} is not a count of ms", one.value)),
        _ => wrong.push(format!("{} biz_rt headers (one expected)", biz_rt.len())),
    }
    // The fake sets none of these; Go writes them back as empty strings (§3).
    for (name, v) in [
        ("payload_encoding", &ack.payload_encoding),
        ("payload_type", &ack.payload_type),
        ("LogIDNew", &ack.log_id_new),
    ] {
        if v.as_deref().is_some_and(|v| !v.is_empty()) {
            wrong.push(format!("{name} {v:?}, pushed none"));
        }
    }
    wrong
}

/// `code` and decoded `data` of an ACK payload (§5 steps 2–3); problems go to `wrong`.
fn parse_payload(raw: &[u8], wrong: &mut Vec<String>) -> (i64, Option<Value>) {
    let Ok(body) = serde_json::from_slice::<Value>(raw) else {
        wrong.push("the payload is not JSON".into());
        return (0, None);
    };
    let code = body["code"].as_i64().unwrap_or_else(|| {
        wrong.push(format!("payload {body} has no integer code"));
        0
    });
    let headers_ok = match &body["headers"] {
        Value::Null => true,
        Value::Object(m) => m.values().all(Value::is_string),
        _ => false,
    };
    if !headers_ok {
        wrong.push("payload headers is not a string map".into());
    }
    let data = match &body["data"] {
        Value::Null => None,
        Value::String(b64) => {
            let json = STANDARD.decode(b64).ok();
            let parsed = json.and_then(|j| serde_json::from_slice(&j).ok());
            if parsed.is_none() {
                wrong.push("data is not base64 of JSON".into());
            }
            parsed
        }
        other => {
            wrong.push(format!("data {other} is not a base64 string"));
            None
        }
    };
    (code, data)
}
