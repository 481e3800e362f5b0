//! `pbbp2.Frame` as the fake writes and reads it, declared here from the proto2 text of
//! the protocol note §3 (and deliberately not shared with the bridge, so the fake checks
//! the client's encoding instead of mirroring it).
//!
//! prost decodes a message that lacks a `required` field as if the field were 0, but the
//! Go and Node decoders reject such a frame (§3), so [`missing_required`] walks the wire
//! bytes itself to see which required fields were really sent.

/// `pbbp2.Header`: one key/value pair.
#[derive(Clone, PartialEq, Eq, prost::Message)]
pub struct Header {
    /// Header name (`type`, `message_id`, `sum`, `seq`, `trace_id`, `biz_rt`, …).
    #[prost(string, required, tag = "1")]
    pub key: String,
    /// Header value, always a string (numbers in decimal).
    #[prost(string, required, tag = "2")]
    pub value: String,
}

/// `pbbp2.Frame`: one WebSocket binary message.
#[derive(Clone, PartialEq, Eq, prost::Message)]
pub struct Frame {
    /// `SeqID`.
    #[prost(uint64, required, tag = "1")]
    pub seq_id: u64,
    /// `LogID`.
    #[prost(uint64, required, tag = "2")]
    pub log_id: u64,
    /// The URL's `service_id`.
    #[prost(int32, required, tag = "3")]
    pub service: i32,
    /// 0 = control (ping/pong), 1 = data (event/card and their ACKs).
    #[prost(int32, required, tag = "4")]
    pub method: i32,
    /// Headers, in order.
    #[prost(message, repeated, tag = "5")]
    pub headers: Vec<Header>,
    /// `payload_encoding` (the fake never sets it).
    #[prost(string, optional, tag = "6")]
    pub payload_encoding: Option<String>,
    /// `payload_type` (the fake never sets it).
    #[prost(string, optional, tag = "7")]
    pub payload_type: Option<String>,
    /// The payload: JSON bytes for data frames, ClientConfig JSON in pongs.
    #[prost(bytes = "vec", optional, tag = "8")]
    pub payload: Option<Vec<u8>>,
    /// `LogIDNew` (the fake never sets it).
    #[prost(string, optional, tag = "9")]
    pub log_id_new: Option<String>,
}

/// `method` of ping/pong frames.
pub const METHOD_CONTROL: i32 = 0;
/// `method` of event/card frames and their ACKs.
pub const METHOD_DATA: i32 = 1;

impl Frame {
    /// A frame with the four required fields and the given headers.
    pub fn new(
        seq_id: u64,
        log_id: u64,
        service: i32,
        method: i32,
        headers: &[(&str, &str)],
    ) -> Self {
        Self {
            seq_id,
            log_id,
            service,
            method,
            headers: headers
                .iter()
                .map(|(k, v)| Header {
                    key: (*k).into(),
                    value: (*v).into(),
                })
                .collect(),
            ..Self::default()
        }
    }

    /// The value of header `key` (the first one, if repeated).
    pub fn header(&self, key: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|h| h.key == key)
            .map(|h| h.value.as_str())
    }

    /// The headers as pairs.
    pub fn header_pairs(&self) -> Vec<(String, String)> {
        self.headers
            .iter()
            .map(|h| (h.key.clone(), h.value.clone()))
            .collect()
    }

    /// The protobuf bytes.
    pub fn encode(&self) -> Vec<u8> {
        prost::Message::encode_to_vec(self)
    }

    /// Decodes protobuf bytes (without the presence check of [`missing_required`]).
    pub fn decode(bytes: &[u8]) -> Result<Self, prost::DecodeError> {
        <Self as prost::Message>::decode(bytes)
    }
}

/// The required fields absent from the encoded frame `bytes`, e.g. `["Frame.method",
/// "Header.value"]`; empty when all are present. Malformed bytes are reported as such.
pub fn missing_required(bytes: &[u8]) -> Vec<String> {
    let Some(top) = fields(bytes) else {
        return vec!["Frame (malformed)".into()];
    };
    let mut missing: Vec<String> = ["SeqID", "LogID", "service", "method"]
        .iter()
        .zip(1..)
        .filter(|(_, tag)| !top.iter().any(|(t, _)| t == tag))
        .map(|(name, _)| format!("Frame.{name}"))
        .collect();
    for (_, header) in top.iter().filter(|(tag, _)| *tag == 5) {
        match header.and_then(fields) {
            None => missing.push("Header (malformed)".into()),
            Some(h) => {
                for (tag, name) in [(1, "key"), (2, "value")] {
                    if !h.iter().any(|(t, _)| *t == tag) {
                        missing.push(format!("Header.{name}"));
                    }
                }
            }
        }
    }
    missing
}

/// One field on the wire: its tag, and its bytes when it is length-delimited.
type Field<'a> = (u64, Option<&'a [u8]>);

/// The top-level fields of a protobuf message; `None` when the bytes do not parse.
fn fields(mut bytes: &[u8]) -> Option<Vec<Field<'_>>> {
    let mut out = Vec::new();
    while !bytes.is_empty() {
        let key = varint(&mut bytes)?;
        let body = match key & 7 {
            0 => varint(&mut bytes).map(|_| None)?,
            1 => skip(&mut bytes, 8).map(|_| None)?,
            2 => {
                let len = usize::try_from(varint(&mut bytes)?).ok()?;
                Some(skip(&mut bytes, len)?)
            }
            5 => skip(&mut bytes, 4).map(|_| None)?,
            _ => return None,
        };
        out.push((key >> 3, body));
    }
    Some(out)
}

fn varint(bytes: &mut &[u8]) -> Option<u64> {
    let mut value = 0u64;
    for shift in (0..64).step_by(7) {
        let (&b, rest) = bytes.split_first()?;
        *bytes = rest;
        value |= u64::from(b & 0x7f) << shift;
        if b & 0x80 == 0 {
            return Some(value);
        }
    }
    None
}

fn skip<'a>(bytes: &mut &'a [u8], n: usize) -> Option<&'a [u8]> {
    if bytes.len() < n {
        return None;
    }
    let (head, rest) = bytes.split_at(n);
    *bytes = rest;
    Some(head)
}
