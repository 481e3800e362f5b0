//! `longconn::frame`: the `pbbp2.Frame` decoder on any bytes, the round trip of any
//! frame, the required fields, field order, and the acknowledgement built from a frame.

use feishu_bridge::longconn::{Frame, FrameError, Header, Kind, METHOD_CONTROL, METHOD_DATA};
use proptest::{collection::vec, option, prelude::*, sample::select};

use crate::{
    mutate, regressions,
    support::{corpus, entry_bytes, fuzz, sdk_frames},
};

const REGRESSIONS: &str = regressions!("frame");

fn header() -> impl Strategy<Value = Header> {
    let key = prop_oneof![
        select(vec![
            "type",
            "message_id",
            "sum",
            "seq",
            "trace_id",
            "biz_rt"
        ])
        .prop_map(str::to_string),
        any::<String>(),
    ];
    let value = prop_oneof![
        select(vec!["ping", "pong", "event", "card", "0", "1", "2", ""]).prop_map(str::to_string),
        any::<String>(),
    ];
    (key, value).prop_map(|(k, v)| Header::new(k, v))
}

fn frame() -> impl Strategy<Value = Frame> {
    let method = prop_oneof![Just(METHOD_CONTROL), Just(METHOD_DATA), any::<i32>()];
    let text = || option::of(any::<String>());
    (
        (any::<u64>(), any::<u64>(), any::<i32>(), method),
        vec(header(), 0..6),
        (text(), text(), option::of(vec(any::<u8>(), 0..200)), text()),
    )
        .prop_map(
            |((seq_id, log_id, service, method), headers, (enc, ty, payload, id))| Frame {
                seq_id,
                log_id,
                service,
                method,
                headers,
                payload_encoding: enc,
                payload_type: ty,
                payload,
                log_id_new: id,
            },
        )
}

/// The seed frames: the SDKs' own, and the corpus (hostile lengths, missing fields).
fn seed_bytes() -> Vec<Vec<u8>> {
    let mut seeds: Vec<Vec<u8>> = sdk_frames().into_iter().map(|(_, b)| b).collect();
    seeds.extend(corpus("frame").iter().map(entry_bytes));
    seeds
}

/// Decodes `bytes`; what decodes is a frame that encodes and decodes to itself.
fn decodes_stably(bytes: &[u8]) -> Result<(), TestCaseError> {
    match Frame::decode_bytes(bytes) {
        Ok(frame) => {
            let again = Frame::decode_bytes(&frame.encode_bytes());
            prop_assert_eq!(again, Ok(frame));
        }
        Err(e) => {
            let text = e.to_string();
            let named = text.starts_with("not a pbbp2 frame")
                || text.starts_with("the frame lacks its required field");
            prop_assert!(named, "{}", text);
        }
    }
    Ok(())
}

#[test]
fn any_bytes_decode_to_a_stable_frame_or_a_named_error() {
    let seeds = seed_bytes();
    let inputs = prop_oneof![
        3 => (select(seeds.clone()), mutate::mutations()).prop_map(|(b, m)| mutate::mutated(&b, &m)),
        2 => (frame(), mutate::mutations()).prop_map(|(f, m)| mutate::mutated(&f.encode_bytes(), &m)),
        1 => vec(any::<u8>(), 0..300),
    ];
    fuzz(REGRESSIONS, seeds, inputs, |bytes| decodes_stably(&bytes));
}

#[test]
fn any_frame_encodes_and_decodes_to_itself() {
    fuzz(REGRESSIONS, vec![], frame(), |frame| {
        prop_assert_eq!(Frame::decode_bytes(&frame.encode_bytes()), Ok(frame));
        Ok(())
    });
}

/// The top-level records of protobuf `bytes` (only for our encoder's output, which
/// uses varint and length-delimited fields): (field number, the record's bytes).
fn records(bytes: &[u8]) -> Vec<(u64, Vec<u8>)> {
    fn varint(bytes: &[u8], at: &mut usize) -> u64 {
        let mut n = 0;
        for shift in (0..64).step_by(7) {
            let b = bytes[*at];
            *at += 1;
            n |= u64::from(b & 0x7f) << shift;
            if b < 0x80 {
                break;
            }
        }
        n
    }
    let (mut out, mut at) = (Vec::new(), 0);
    while at < bytes.len() {
        let start = at;
        let key = varint(bytes, &mut at);
        match key & 7 {
            0 => {
                varint(bytes, &mut at);
            }
            2 => at += varint(bytes, &mut at) as usize,
            other => panic!("wire type {other} is not in pbbp2"),
        }
        out.push((key >> 3, bytes[start..at].to_vec()));
    }
    out
}

#[test]
fn a_frame_missing_a_required_field_is_refused_by_name() {
    let names = ["SeqID", "LogID", "service", "method"];
    fuzz(
        REGRESSIONS,
        vec![],
        (frame(), 1..=4u64),
        |(frame, missing)| {
            let bytes: Vec<u8> = records(&frame.encode_bytes())
                .into_iter()
                .filter(|(field, _)| *field != missing)
                .flat_map(|(_, r)| r)
                .collect();
            let name = names[missing as usize - 1];
            prop_assert_eq!(
                Frame::decode_bytes(&bytes),
                Err(FrameError::MissingField(name))
            );
            Ok(())
        },
    );
}

#[test]
fn a_header_without_its_key_or_value_is_refused() {
    let inputs = (frame(), header(), any::<bool>(), any::<usize>());
    fuzz(
        REGRESSIONS,
        vec![],
        inputs,
        |(mut frame, broken, drop_key, at)| {
            let at = at % (frame.headers.len() + 1);
            frame.headers.insert(at, broken);
            let bytes: Vec<u8> = records(&frame.encode_bytes())
                .into_iter()
                .enumerate()
                .flat_map(|(i, (field, record))| {
                    // Records 0-3 are the four required fields; header `at` follows them.
                    if field != 5 || i != 4 + at {
                        return record;
                    }
                    let inner = &record[record.len() - header_len(&frame.headers[at])..];
                    let kept: Vec<u8> = records(inner)
                        .into_iter()
                        .filter(|(f, _)| *f != if drop_key { 1 } else { 2 })
                        .flat_map(|(_, r)| r)
                        .collect();
                    let mut out = vec![0x2a];
                    out.extend(varint_bytes(kept.len()));
                    out.extend(kept);
                    out
                })
                .collect();
            let name = if drop_key {
                "Header.key"
            } else {
                "Header.value"
            };
            prop_assert_eq!(
                Frame::decode_bytes(&bytes),
                Err(FrameError::MissingField(name))
            );
            Ok(())
        },
    );
}

fn header_len(h: &Header) -> usize {
    prost::Message::encoded_len(h)
}

fn varint_bytes(mut n: usize) -> Vec<u8> {
    let mut out = Vec::new();
    loop {
        let b = (n & 0x7f) as u8;
        n >>= 7;
        if n == 0 {
            out.push(b);
            return out;
        }
        out.push(b | 0x80);
    }
}

#[test]
fn the_order_of_fields_on_the_wire_does_not_matter() {
    let inputs = (frame(), vec(any::<u32>(), 9));
    fuzz(REGRESSIONS, vec![], inputs, |(frame, weights)| {
        // Reorder the records by a weight per field number, keeping the headers (the
        // one repeated field) in their own order.
        let mut recs = records(&frame.encode_bytes());
        recs.sort_by_key(|(field, _)| weights[*field as usize - 1]);
        let bytes: Vec<u8> = recs.into_iter().flat_map(|(_, r)| r).collect();
        prop_assert_eq!(Frame::decode_bytes(&bytes), Ok(frame));
        Ok(())
    });
}

#[test]
fn kind_and_ack_follow_the_first_type_header_and_echo_the_frame() {
    let inputs = (
        frame(),
        any::<u16>(),
        any::<u64>(),
        option::of(crate::json::value()),
    );
    fuzz(REGRESSIONS, vec![], inputs, |(frame, code, ms, data)| {
        let ty = frame
            .headers
            .iter()
            .find(|h| h.key == "type")
            .map(|h| h.value.as_str());
        let want = match (frame.method, ty.unwrap_or_default()) {
            (METHOD_CONTROL, "ping") => Kind::Ping,
            (METHOD_CONTROL, "pong") => Kind::Pong,
            (METHOD_DATA, "event") => Kind::Event,
            (METHOD_DATA, "card") => Kind::Card,
            (_, other) => Kind::Other(other.to_string()),
        };
        prop_assert_eq!(frame.kind(), want);
        let ack = frame.ack(code, data.as_ref(), ms);
        prop_assert_eq!(Frame::decode_bytes(&ack.encode_bytes()), Ok(ack.clone()));
        prop_assert_eq!(&ack.headers[..frame.headers.len()], &frame.headers[..]);
        prop_assert_eq!(
            ack.headers.last(),
            Some(&Header::new("biz_rt", ms.to_string()))
        );
        let body: serde_json::Value =
            serde_json::from_slice(ack.payload.as_deref().unwrap_or_default()).expect("JSON");
        prop_assert_eq!(&body["code"], &serde_json::json!(code));
        prop_assert_eq!(body.get("data").is_some(), data.is_some());
        let same = (
            ack.seq_id,
            ack.log_id,
            ack.service,
            ack.method,
            &ack.log_id_new,
        ) == (
            frame.seq_id,
            frame.log_id,
            frame.service,
            frame.method,
            &frame.log_id_new,
        );
        prop_assert!(same, "the ack echoes the frame");
        Ok(())
    });
}
