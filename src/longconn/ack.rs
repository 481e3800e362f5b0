//! The acknowledgement of a data frame: the one answer Feishu waits for, within 3 s,
//! before it pushes the message again.
//!
//! The answer is the received frame sent back — every field and header as it came, for
//! a split message the fragment that completed it — with the header `biz_rt` (the time
//! the client spent, in ms) appended and the payload replaced by UTF-8 JSON:
//! `{"code":200}` for success, `{"code":500}` for failure, and for a callback's answer
//! `"data"`: the base64 of that answer's JSON (not the JSON itself: the SDKs all encode
//! it this way, and the server decodes it so).

use base64::{Engine, engine::general_purpose::STANDARD};

use super::frame::{Frame, Header};

impl Frame {
    /// The acknowledgement of this (data) frame: the frame echoed (SeqID, LogID, service,
    /// method, payload_encoding, payload_type, LogIDNew and every header kept), header
    /// `biz_rt` appended with `biz_rt_ms`, payload replaced by JSON `{"code":code}` plus
    /// `"data": base64(JSON of data)` when `data` is Some.
    pub fn ack(&self, code: u16, data: Option<&serde_json::Value>, biz_rt_ms: u64) -> Self {
        let mut headers = self.headers.clone();
        headers.push(Header::new("biz_rt", biz_rt_ms.to_string()));
        // Written by hand: a number and a base64 string (whose alphabet needs no JSON
        // escaping) cannot fail to serialise, so no error path is needed.
        let payload = match data {
            None => format!(r#"{{"code":{code}}}"#),
            Some(data) => {
                let data = STANDARD.encode(data.to_string());
                format!(r#"{{"code":{code},"data":"{data}"}}"#)
            }
        };
        // Spelled out field by field (not `..self.clone()`): the received payload is not
        // copied only to be dropped, and a field added to the frame must be decided here.
        Self {
            seq_id: self.seq_id,
            log_id: self.log_id,
            service: self.service,
            method: self.method,
            headers,
            payload_encoding: self.payload_encoding.clone(),
            payload_type: self.payload_type.clone(),
            payload: Some(payload.into_bytes()),
            log_id_new: self.log_id_new.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;
    use crate::longconn::frame::METHOD_DATA;

    fn event() -> Frame {
        Frame {
            seq_id: 11,
            log_id: 9_000_000_000_000_000_001,
            service: 42,
            method: METHOD_DATA,
            headers: [
                ("type", "card"),
                ("message_id", "m-1"),
                ("sum", "2"),
                ("seq", "1"),
                ("trace_id", "t-1"),
            ]
            .into_iter()
            .map(|(k, v)| Header::new(k, v))
            .collect(),
            payload_encoding: Some(String::new()),
            payload_type: Some("json".into()),
            payload: Some(br#"{"schema":"2.0"}"#.to_vec()),
            log_id_new: Some("log-new".into()),
        }
    }

    fn payload_json(frame: &Frame) -> Value {
        serde_json::from_slice(frame.payload.as_deref().expect("a payload")).expect("JSON")
    }

    #[test]
    fn an_ack_echoes_the_frame_and_appends_biz_rt() {
        let received = event();
        let ack = received.ack(200, None, 17);
        assert_eq!(ack.headers[..5], received.headers[..], "every header kept");
        assert_eq!(ack.headers[5], Header::new("biz_rt", "17"));
        assert_eq!(ack.headers.len(), 6);
        assert_eq!(ack.payload.as_deref(), Some(&br#"{"code":200}"#[..]));
        let echoed = Frame {
            headers: received.headers.clone(),
            payload: received.payload.clone(),
            ..ack.clone()
        };
        assert_eq!(echoed, received, "every other field kept");
    }

    #[test]
    fn a_failure_is_code_500() {
        assert_eq!(
            payload_json(&event().ack(500, None, 0)),
            json!({"code": 500})
        );
    }

    #[test]
    fn data_travels_as_base64_of_its_json() {
        let answer = json!({"toast": {"type": "success", "content": "已批准 \"ok\""}});
        let ack = event().ack(200, Some(&answer), 3);
        let body = payload_json(&ack);
        assert_eq!(body["code"], 200);
        assert_eq!(body.as_object().map(|o| o.len()), Some(2), "{body}");
        let data = STANDARD
            .decode(body["data"].as_str().expect("data is a string"))
            .expect("base64");
        let decoded: Value = serde_json::from_slice(&data).expect("JSON inside");
        assert_eq!(decoded, answer);
    }

    #[test]
    fn an_ack_survives_the_wire() {
        let ack = event().ack(200, Some(&json!([1, "two"])), 5);
        assert_eq!(Frame::decode_bytes(&ack.encode_bytes()), Ok(ack));
    }
}
