//! `protocol::envelope` (schema 2.0, 1.0, `url_verification`), through the entry points
//! that use it: a callback to a profile without an Encrypt Key, the same document
//! sealed for a keyed profile, and a push over the long connection.

use feishu_bridge::protocol::{
    Credentials, SignedHeaders, Verified,
    crypto::{self, AesKey},
    events::{self, CARD_ACTION, CARD_ACTION_LEGACY, MESSAGE_RECALLED, MESSAGE_RECEIVE},
    strip::without_verification_token,
    verify::{accept_pushed, verify_event},
};
use proptest::{collection::vec, prelude::*, sample::select};
use serde_json::{Map, Value, json};

use crate::{
    envelope_model::{Outcome, POSITIONAL, Route, envelope, expected, repeats_a_name, seen},
    json, mutate, regressions,
    support::{corpus, entry_bytes, fuzz, vectors},
};

const REGRESSIONS: &str = regressions!("envelope");

/// The vectors' Verification Token: their mutated plaintexts keep passing its check.
const TOKEN: &str = "rvaYgkND1GOiu5MM0E1rncYC6PLtF7JV";
const KEY: &str = "fuzz-envelope-key";

const ANY_TIME: feishu_bridge::protocol::Freshness = feishu_bridge::protocol::Freshness {
    now_secs: 0,
    tolerance_secs: 0,
};

fn plain_callback(body: &[u8]) -> Outcome {
    let creds = Credentials {
        encrypt: None,
        verification_token: TOKEN,
    };
    seen(verify_event(
        creds,
        SignedHeaders::default(),
        body,
        ANY_TIME,
    ))
}

fn pushed(body: &[u8], aes: Option<&AesKey>) -> Outcome {
    seen(accept_pushed(body, aes).map(Verified::Event))
}

/// The document as the parser will see it: serialised and read back (so a float is the
/// float the text denotes).
fn reparsed(doc: Map<String, Value>) -> (Vec<u8>, Map<String, Value>) {
    let bytes = Value::Object(doc).to_string().into_bytes();
    let back = serde_json::from_slice(&bytes).expect("our own JSON");
    (bytes, back)
}

/// Checks both routes of `bytes` against the model, as far as it applies.
fn agrees_with_the_model(bytes: &[u8]) -> Result<(), TestCaseError> {
    let (callback, push) = (plain_callback(bytes), pushed(bytes, None));
    match serde_json::from_slice::<Value>(bytes) {
        // The envelope types skip a member they do not know without a depth limit (the
        // body size bounds it), where a `Value` stops at 128 levels: no model then.
        Err(e) if e.to_string().starts_with("recursion limit exceeded") => {}
        Err(_) => {
            prop_assert!(
                callback.is_err() && push.is_err(),
                "{:?} {:?}",
                callback,
                push
            );
        }
        Ok(Value::Object(doc)) if !repeats_a_name(bytes) => {
            for (got, route) in [
                (callback, Route::Callback { token: TOKEN }),
                (push, Route::Pushed),
            ] {
                let want = expected(&doc, route);
                if want != Err(POSITIONAL) {
                    prop_assert_eq!(got, want, "{:?}", route);
                }
            }
        }
        // Not an object, or a repeated name: anything but a stored event from a
        // non-object (and never a panic).
        Ok(other) => {
            for got in [callback, push] {
                let event = matches!(got, Ok(crate::envelope_model::Seen::Event { .. }));
                prop_assert!(!event || other.is_object(), "{:?}", got);
            }
        }
    }
    Ok(())
}

#[test]
fn generated_envelopes_are_classified_as_the_sdk_rules_say() {
    let docs = prop_oneof![
        4 => envelope(TOKEN).prop_map(|d| reparsed(d).0),
        1 => json::value().prop_map(|v| v.to_string().into_bytes()),
    ];
    fuzz(REGRESSIONS, vec![], docs, |bytes| {
        agrees_with_the_model(&bytes)
    });
}

#[test]
fn mutated_vector_envelopes_parse_consistently_or_are_refused() {
    let mut seeds: Vec<Vec<u8>> = vectors()
        .iter()
        .filter_map(|v| v["plaintext"].as_str())
        .map(|p| p.as_bytes().to_vec())
        .collect();
    seeds.extend(corpus("envelope").iter().map(entry_bytes));
    let inputs = (select(seeds.clone()), mutate::mutations())
        .prop_map(|(seed, m)| mutate::mutated(&seed, &m));
    fuzz(REGRESSIONS, seeds, inputs, |bytes| {
        agrees_with_the_model(&bytes)
    });
}

#[test]
fn the_encrypted_wrapper_changes_nothing_but_the_transport() {
    let aes = AesKey::derive(KEY);
    let creds = Credentials {
        encrypt: Some((KEY, &aes)),
        verification_token: TOKEN,
    };
    let docs = prop_oneof![
        envelope(TOKEN).prop_map(|mut d| {
            d.remove("encrypt");
            reparsed(d).0
        }),
        vec(any::<u8>(), 0..64),
    ];
    fuzz(
        REGRESSIONS,
        vec![],
        (docs, any::<[u8; 16]>()),
        |(plain, iv)| {
            // Only an object without an `encrypt` member reads the same both ways (a plain
            // profile refuses `{"encrypt":…}` outright, and reads a JSON array positionally).
            let object = serde_json::from_slice::<Value>(&plain).map(|v| v.is_object());
            if matches!(object, Ok(false)) || plain.windows(9).any(|w| w == b"\"encrypt\"") {
                return Ok(());
            }
            let body = json!({"encrypt": crypto::encrypt(&aes, iv, &plain)}).to_string();
            let sig = crypto::event_signature("1", "2", KEY, body.as_bytes());
            let headers = SignedHeaders {
                timestamp: Some("1"),
                nonce: Some("2"),
                signature: Some(&sig),
            };
            let sealed = seen(verify_event(creds, headers, body.as_bytes(), ANY_TIME));
            prop_assert_eq!(sealed, plain_callback(&plain));
            prop_assert_eq!(pushed(body.as_bytes(), Some(&aes)), pushed(&plain, None));
            Ok(())
        },
    );
}

#[test]
fn the_stored_payload_is_the_document_less_its_verification_token() {
    let docs = prop_oneof![
        envelope(TOKEN),
        vec((json::word(), json::value()), 0..6).prop_map(json::object),
    ];
    fuzz(REGRESSIONS, vec![], docs, |doc| {
        let (bytes, doc) = reparsed(doc);
        let text = String::from_utf8(bytes).expect("our own JSON is UTF-8");
        let stripped = without_verification_token(&text).expect("an object");
        let mut want = doc;
        want.remove("token");
        if let Some(Value::Object(h)) = want.get_mut("header") {
            h.remove("token");
        }
        let got: Value = serde_json::from_str(&stripped).expect("still JSON");
        prop_assert_eq!(got, Value::Object(want));
        // Stripping twice changes nothing more.
        prop_assert_eq!(without_verification_token(&stripped), Some(stripped));
        Ok(())
    });
}

/// Every string value of `v` replaced by a marker, and members dropped, nulled or
/// given the wrong type as `choices` say.
fn scrambled(v: &Value, choices: &mut impl Iterator<Item = u8>) -> Value {
    match v {
        Value::String(_) => json!(format!("VALUE-MARK-{}", choices.next().unwrap_or(0))),
        Value::Array(items) => Value::Array(items.iter().map(|i| scrambled(i, choices)).collect()),
        Value::Object(o) => Value::Object(
            o.iter()
                .filter_map(|(k, v)| {
                    let new = match choices.next().unwrap_or(9) % 10 {
                        0 => return None,
                        1 => json!(7),
                        2 => json!([]),
                        3 => Value::Null,
                        4 => json!({"x": "VALUE-MARK-nested"}),
                        _ => scrambled(v, choices),
                    };
                    Some((k.clone(), new))
                })
                .collect(),
        ),
        other => other.clone(),
    }
}

#[test]
fn typed_event_errors_name_the_path_never_a_value() {
    let templates: Vec<(String, Value)> = vectors()
        .iter()
        .filter_map(|v| {
            let plain: Value = serde_json::from_str(v["plaintext"].as_str()?).ok()?;
            let kind = plain["header"]["event_type"].as_str().map(str::to_string);
            let kind = kind.unwrap_or_else(|| CARD_ACTION_LEGACY.to_string());
            events::is_handled(&kind).then_some((kind, plain))
        })
        .collect();
    let kinds = [
        MESSAGE_RECEIVE,
        MESSAGE_RECALLED,
        CARD_ACTION,
        CARD_ACTION_LEGACY,
    ];
    assert!(
        kinds.iter().all(|k| templates.iter().any(|t| t.0 == *k)),
        "a seed per type"
    );
    let inputs = (select(templates), vec(any::<u8>(), 0..64));
    fuzz(
        REGRESSIONS,
        vec![],
        inputs,
        |((kind, template), choices)| {
            let payload = scrambled(&template, &mut choices.into_iter()).to_string();
            if let Err(e) = events::parse(&kind, &payload) {
                let text = e.to_string();
                prop_assert!(!text.contains("VALUE-MARK"), "{}", text);
            }
            Ok(())
        },
    );
}
