//! The `pbbp2.Frame` message: one per binary WebSocket message, both ways.
//!
//! The schema is proto2 with four required fields (SeqID, LogID, service, method). prost
//! writes a `required` scalar even when it is 0, which is what the official decoders
//! expect: Go and Node reject a frame that lacks any of them, or a header without its key
//! or value, and so do we. Optional fields are written only when set (as Node and Python
//! do; Go writes its three optional strings even when empty, which decodes the same).
//! The acknowledgement built from a data frame lives in `ack.rs`.

use prost::Message;

/// `method` of a control frame (ping, pong).
pub const METHOD_CONTROL: i32 = 0;
/// `method` of a data frame (an event or card message, and its acknowledgement).
pub const METHOD_DATA: i32 = 1;

/// One `key=value` header of a frame (`pbbp2.Header`).
#[derive(Clone, PartialEq, Eq, Message)]
pub struct Header {
    /// The header's name: `type`, `message_id`, `sum`, `seq`, `trace_id`, `biz_rt`, ….
    #[prost(string, required, tag = "1")]
    pub key: String,
    /// Its value, decimal for the numeric headers.
    #[prost(string, required, tag = "2")]
    pub value: String,
}

impl Header {
    /// A header from its key and value.
    pub fn new(key: impl Into<String>, value: impl Into<String>) -> Self {
        Self {
            key: key.into(),
            value: value.into(),
        }
    }
}

/// One long-connection frame (`pbbp2.Frame`). Its `Debug` shows the payload's length,
/// never its bytes: a data frame's payload is a user's message.
#[derive(Clone, PartialEq, Message)]
#[prost(skip_debug)]
pub struct Frame {
    /// `SeqID`: echoed in the acknowledgement; 0 in a ping.
    #[prost(uint64, required, tag = "1")]
    pub seq_id: u64,
    /// `LogID`: echoed in the acknowledgement; 0 in a ping.
    #[prost(uint64, required, tag = "2")]
    pub log_id: u64,
    /// The `service_id` of the connection URL.
    #[prost(int32, required, tag = "3")]
    pub service: i32,
    /// [`METHOD_CONTROL`] or [`METHOD_DATA`].
    #[prost(int32, required, tag = "4")]
    pub method: i32,
    /// The headers, in order; keys may repeat on the wire, the first one counts.
    #[prost(message, repeated, tag = "5")]
    pub headers: Vec<Header>,
    /// Unused by the SDKs; echoed in the acknowledgement.
    #[prost(string, optional, tag = "6")]
    pub payload_encoding: Option<String>,
    /// Unused by the SDKs; echoed in the acknowledgement.
    #[prost(string, optional, tag = "7")]
    pub payload_type: Option<String>,
    /// A pong's client settings, a data frame's event JSON (or a piece of it), or an
    /// acknowledgement's `{"code":…}`.
    #[prost(bytes = "vec", optional, tag = "8")]
    pub payload: Option<Vec<u8>>,
    /// `LogIDNew`: echoed in the acknowledgement.
    #[prost(string, optional, tag = "9")]
    pub log_id_new: Option<String>,
}

impl std::fmt::Debug for Frame {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Frame")
            .field("seq_id", &self.seq_id)
            .field("log_id", &self.log_id)
            .field("service", &self.service)
            .field("method", &self.method)
            .field("headers", &self.headers)
            .field("payload_encoding", &self.payload_encoding)
            .field("payload_type", &self.payload_type)
            .field("payload_len", &self.payload.as_ref().map(Vec::len))
            .field("log_id_new", &self.log_id_new)
            .finish()
    }
}

/// What a frame is, from its `type` header and its method.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Kind {
    /// A control frame `type=ping` (the server's are ignored, not answered).
    Ping,
    /// A control frame `type=pong`, maybe carrying client settings.
    Pong,
    /// A data frame `type=event`: an event or a callback.
    Event,
    /// A data frame `type=card`: the SDKs drop these; we treat them as events.
    Card,
    /// Anything else: the `type` header's value (empty when it is missing), including a
    /// known type under the wrong method.
    Other(String),
}

/// Why bytes are not a frame. Names the field or the decoder's reason, never the bytes.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    /// Not protobuf, or not this schema.
    #[error("not a pbbp2 frame: {0}")]
    Malformed(#[from] prost::DecodeError),
    /// A required field is absent (the official decoders refuse such a frame too).
    #[error("the frame lacks its required field {0}")]
    MissingField(&'static str),
}

impl Frame {
    /// Decodes one binary WebSocket message, insisting on the required fields.
    pub fn decode_bytes(bytes: &[u8]) -> Result<Self, FrameError> {
        WireFrame::decode(bytes)?.into_frame()
    }

    /// The bytes of one binary WebSocket message.
    pub fn encode_bytes(&self) -> Vec<u8> {
        self.encode_to_vec()
    }

    /// The client's ping: a control frame for `service` with SeqID and LogID 0, the one
    /// header `type=ping` and no payload.
    pub fn ping(service: i32) -> Self {
        Self {
            seq_id: 0,
            log_id: 0,
            service,
            method: METHOD_CONTROL,
            headers: vec![Header::new("type", "ping")],
            payload_encoding: None,
            payload_type: None,
            payload: None,
            log_id_new: None,
        }
    }

    /// The value of the first header named `key`.
    pub fn header(&self, key: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|h| h.key == key)
            .map(|h| h.value.as_str())
    }

    /// What this frame is.
    pub fn kind(&self) -> Kind {
        let kind = self.header("type").unwrap_or_default();
        match (self.method, kind) {
            (METHOD_CONTROL, "ping") => Kind::Ping,
            (METHOD_CONTROL, "pong") => Kind::Pong,
            (METHOD_DATA, "event") => Kind::Event,
            (METHOD_DATA, "card") => Kind::Card,
            _ => Kind::Other(kind.to_string()),
        }
    }
}

/// The decoding view of a frame: the same tags with the required fields optional, so an
/// absent one is seen rather than read as 0 (prost itself does not check `required`).
#[derive(Clone, PartialEq, Message)]
struct WireFrame {
    #[prost(uint64, optional, tag = "1")]
    seq_id: Option<u64>,
    #[prost(uint64, optional, tag = "2")]
    log_id: Option<u64>,
    #[prost(int32, optional, tag = "3")]
    service: Option<i32>,
    #[prost(int32, optional, tag = "4")]
    method: Option<i32>,
    #[prost(message, repeated, tag = "5")]
    headers: Vec<WireHeader>,
    #[prost(string, optional, tag = "6")]
    payload_encoding: Option<String>,
    #[prost(string, optional, tag = "7")]
    payload_type: Option<String>,
    #[prost(bytes = "vec", optional, tag = "8")]
    payload: Option<Vec<u8>>,
    #[prost(string, optional, tag = "9")]
    log_id_new: Option<String>,
}

/// The decoding view of a header.
#[derive(Clone, PartialEq, Message)]
struct WireHeader {
    #[prost(string, optional, tag = "1")]
    key: Option<String>,
    #[prost(string, optional, tag = "2")]
    value: Option<String>,
}

impl WireFrame {
    fn into_frame(self) -> Result<Frame, FrameError> {
        let headers = self
            .headers
            .into_iter()
            .map(|h| {
                Ok(Header {
                    key: h.key.ok_or(FrameError::MissingField("Header.key"))?,
                    value: h.value.ok_or(FrameError::MissingField("Header.value"))?,
                })
            })
            .collect::<Result<_, FrameError>>()?;
        Ok(Frame {
            seq_id: self.seq_id.ok_or(FrameError::MissingField("SeqID"))?,
            log_id: self.log_id.ok_or(FrameError::MissingField("LogID"))?,
            service: self.service.ok_or(FrameError::MissingField("service"))?,
            method: self.method.ok_or(FrameError::MissingField("method"))?,
            headers,
            payload_encoding: self.payload_encoding,
            payload_type: self.payload_type,
            payload: self.payload,
            log_id_new: self.log_id_new,
        })
    }
}

#[cfg(test)]
mod tests {
    use base64::{Engine, engine::general_purpose::STANDARD};
    use serde_json::Value;

    use super::*;
    use crate::longconn::ClientConfig;

    /// Frames the official Python SDK encoded (see the fixture's note).
    fn fixtures() -> Vec<(String, Vec<u8>, Frame)> {
        let file: Value =
            serde_json::from_str(include_str!("../../tests/fixtures/pbbp2-frames.json"))
                .expect("fixture JSON");
        let text = |v: &Value| v.as_str().map(str::to_string);
        let frames = file["frames"].as_array().expect("frames");
        frames
            .iter()
            .map(|entry| {
                let f = &entry["fields"];
                let number = |key: &str| f[key].as_u64().expect(key);
                let frame = Frame {
                    seq_id: number("seq_id"),
                    log_id: number("log_id"),
                    service: f["service"].as_i64().expect("service") as i32,
                    method: f["method"].as_i64().expect("method") as i32,
                    headers: f["headers"]
                        .as_array()
                        .expect("headers")
                        .iter()
                        .map(|kv| {
                            Header::new(text(&kv[0]).expect("key"), text(&kv[1]).expect("value"))
                        })
                        .collect(),
                    payload_encoding: text(&f["payload_encoding"]),
                    payload_type: text(&f["payload_type"]),
                    payload: text(&f["payload"]).map(String::into_bytes),
                    log_id_new: text(&f["log_id_new"]),
                };
                let bytes = hex::decode(entry["hex"].as_str().expect("hex")).expect("hex");
                (text(&entry["name"]).expect("name"), bytes, frame)
            })
            .collect()
    }

    fn fixture(name: &str) -> (Vec<u8>, Frame) {
        let (_, bytes, frame) = fixtures()
            .into_iter()
            .find(|(n, ..)| n == name)
            .unwrap_or_else(|| panic!("fixture {name}"));
        (bytes, frame)
    }

    fn payload_json(frame: &Frame) -> Value {
        serde_json::from_slice(frame.payload.as_deref().expect("a payload")).expect("JSON")
    }

    #[test]
    fn every_sdk_frame_decodes_into_its_fields() {
        let all = fixtures();
        assert_eq!(all.len(), 7, "ping, pong, event, two fragments, two acks");
        for (name, bytes, expected) in all {
            assert_eq!(Frame::decode_bytes(&bytes), Ok(expected), "{name}");
        }
    }

    #[test]
    fn our_encoding_of_every_sdk_frame_is_its_bytes() {
        // Both encoders write the fields in tag order and an optional field exactly when
        // it is set (Go-style empty strings included), so the bytes are the same.
        for (name, bytes, frame) in fixtures() {
            let ours = frame.encode_bytes();
            assert_eq!(Frame::decode_bytes(&ours).as_ref(), Ok(&frame), "{name}");
            assert_eq!(hex::encode(&ours), hex::encode(&bytes), "{name}");
        }
    }

    #[test]
    fn our_ping_is_the_sdks_ping() {
        let (sdk, expected) = fixture("ping");
        let ping = Frame::ping(42);
        assert_eq!(ping, expected);
        let bytes = ping.encode_bytes();
        assert_eq!(bytes, sdk);
        assert!(bytes.starts_with(&[0x08, 0x00, 0x10, 0x00]), "{bytes:02x?}");
        assert_eq!(ping.kind(), Kind::Ping);
    }

    #[test]
    fn our_acks_match_the_sdks_but_for_json_spacing() {
        // The SDK writes `{"code": 200}` (Python's default separators), and its `data` is
        // the base64 of equally spaced JSON; we write both compact. Every other byte is
        // the same; the JSON is the same, which is all the server reads.
        let data_of = |body: &Value| -> Option<Value> {
            let text = body.get("data")?.as_str().expect("a string");
            let json = STANDARD.decode(text).expect("base64");
            Some(serde_json::from_slice(&json).expect("JSON"))
        };
        // The card event the second ack answers is not in the fixture: it is that ack
        // without its last header (the SDK's `biz_rt`); its payload is replaced anyway.
        let (_, mut card_event) = fixture("ack_with_data");
        card_event.headers.pop();
        for (name, received) in [("ack", fixture("event").1), ("ack_with_data", card_event)] {
            let (sdk_bytes, sdk) = fixture(name);
            let sdk_body = payload_json(&sdk);
            let ms = sdk
                .header("biz_rt")
                .and_then(|v| v.parse().ok())
                .expect("ms");
            let ours = received.ack(200, data_of(&sdk_body).as_ref(), ms);
            let our_body = payload_json(&ours);
            assert_eq!(our_body["code"], sdk_body["code"], "{name}");
            assert_eq!(data_of(&our_body), data_of(&sdk_body), "{name}");
            let with_sdk_payload = Frame {
                payload: sdk.payload.clone(),
                ..ours
            };
            assert_eq!(with_sdk_payload.encode_bytes(), sdk_bytes, "{name}");
        }
    }

    #[test]
    fn kinds_come_from_the_type_header_and_the_method() {
        assert_eq!(fixture("pong").1.kind(), Kind::Pong);
        assert_eq!(fixture("event").1.kind(), Kind::Event);
        let mut frame = fixture("event").1;
        frame.headers[0].value = "card".into();
        assert_eq!(frame.kind(), Kind::Card);
        frame.method = METHOD_CONTROL;
        assert_eq!(
            frame.kind(),
            Kind::Other("card".into()),
            "card under control"
        );
        frame.headers.clear();
        assert_eq!(frame.kind(), Kind::Other(String::new()));
        let mut ping = Frame::ping(1);
        ping.method = METHOD_DATA;
        assert_eq!(ping.kind(), Kind::Other("ping".into()));
    }

    #[test]
    fn the_first_header_of_a_name_counts() {
        let mut frame = Frame::ping(1);
        frame.headers.push(Header::new("type", "pong"));
        assert_eq!(frame.header("type"), Some("ping"));
        assert_eq!(frame.header("trace_id"), None);
    }

    #[test]
    fn a_pongs_payload_is_client_settings() {
        let (_, pong) = fixture("pong");
        let config = ClientConfig::from_json(pong.payload.as_deref().expect("payload"));
        let expected = ClientConfig {
            reconnect_count: Some(-1),
            reconnect_interval_secs: Some(60),
            reconnect_nonce_secs: Some(10),
            ping_interval_secs: Some(90),
        };
        assert_eq!(config, Some(expected));
    }

    #[test]
    fn a_frame_without_a_required_field_is_refused() {
        let full = Frame::ping(42).encode_bytes();
        // 08 00 | 10 00 | 18 2a | 20 00 | 2a 0c (header): drop one field at a time.
        for (at, field) in [(0, "SeqID"), (2, "LogID"), (4, "service"), (6, "method")] {
            let mut bytes = full.clone();
            bytes.drain(at..at + 2);
            assert_eq!(
                Frame::decode_bytes(&bytes),
                Err(FrameError::MissingField(field))
            );
        }
        let no_value = hex::decode("08001000182a20002a060a0474797065").expect("hex");
        assert_eq!(
            Frame::decode_bytes(&no_value),
            Err(FrameError::MissingField("Header.value"))
        );
        let no_key = hex::decode("08001000182a20002a06120470696e67").expect("hex");
        assert_eq!(
            Frame::decode_bytes(&no_key),
            Err(FrameError::MissingField("Header.key"))
        );
    }

    #[test]
    fn errors_and_debug_never_show_the_payload() {
        let (bytes, frame) = fixture("event");
        let cut = Frame::decode_bytes(&bytes[..bytes.len() - 3]).expect_err("truncated");
        assert!(matches!(cut, FrameError::Malformed(_)), "{cut}");
        let text = cut.to_string();
        assert!(
            !text.contains("schema") && !text.contains("ev-fixture"),
            "{text}"
        );
        let garbage = Frame::decode_bytes(b"\xff\xff\xff").expect_err("not protobuf");
        assert!(
            garbage.to_string().starts_with("not a pbbp2 frame"),
            "{garbage}"
        );
        let debug = format!("{frame:?}");
        assert!(
            !debug.contains("ev-fixture") && !debug.contains("你好"),
            "{debug}"
        );
        assert!(
            debug.contains("trace-fixture-0001"),
            "headers shown: {debug}"
        );
    }
}
