//! `protocol::verify`: the signature is checked over the raw bytes before anything else,
//! an unsigned request to a keyed profile learns nothing but `bad_signature`, and every
//! refusal carries a known code and no secret.

use base64::{Engine, engine::general_purpose::STANDARD};
use feishu_bridge::protocol::{
    Credentials, Freshness, Rejection, SignedHeaders, Verified,
    crypto::{self, AesKey},
    envelope::{parse_create_time, parse_fractional_secs},
    verify::{accept_pushed, verify_card, verify_card_url, verify_event},
};
use proptest::{collection::vec, option, prelude::*, sample::select};
use serde::de::IgnoredAny;
use serde_json::{Value, json};

use crate::{
    json, mutate, regressions,
    support::{corpus, entry_bytes, fuzz, vectors},
};

const REGRESSIONS: &str = regressions!("verify");

/// The error codes a refused callback may carry.
const CODES: &[&str] = &[
    "bad_signature",
    "bad_token",
    "stale_timestamp",
    "undecryptable",
    "malformed_json",
];

/// The freshness window switched off (the vectors are from 2025).
const ANY_TIME: Freshness = Freshness {
    now_secs: 0,
    tolerance_secs: 0,
};

/// One signed request of the vectors: (which scheme, encrypt key, token, ts, nonce,
/// body, signature). Only those whose signature is right for their body.
#[derive(Debug, Clone)]
struct Signed {
    legacy_card: bool,
    key: String,
    token: String,
    parts: [String; 4],
}

impl Signed {
    fn verify(&self, parts: &[String; 4]) -> Result<Verified, Rejection> {
        let [ts, nonce, body, sig] = parts;
        let headers = SignedHeaders {
            timestamp: Some(ts),
            nonce: Some(nonce),
            signature: Some(sig),
        };
        if self.legacy_card {
            return verify_card(&self.token, headers, body.as_bytes(), ANY_TIME);
        }
        let aes = AesKey::derive(&self.key);
        let creds = Credentials {
            encrypt: Some((&self.key, &aes)),
            verification_token: &self.token,
        };
        verify_event(creds, headers, body.as_bytes(), ANY_TIME)
    }
}

fn signed_vectors() -> Vec<Signed> {
    let text = |v: &Value, k: &str| v[k].as_str().unwrap_or_default().to_string();
    vectors()
        .iter()
        .filter_map(|v| {
            let legacy_card = v["kind"] == "legacy_card_v1";
            let key = text(v, "encrypt_key");
            let parts = [
                text(v, "timestamp"),
                text(v, "nonce"),
                text(v, "body"),
                v["headers"]["X-Lark-Signature"].as_str()?.to_string(),
            ];
            let [ts, nonce, body, sig] = &parts;
            let expected = if legacy_card {
                crypto::card_signature(ts, nonce, &text(v, "verification_token"), body.as_bytes())
            } else {
                crypto::event_signature(ts, nonce, &key, body.as_bytes())
            };
            let right = *sig == expected && (legacy_card || !key.is_empty());
            right.then(|| Signed {
                legacy_card,
                key,
                token: text(v, "verification_token"),
                parts,
            })
        })
        .collect()
}

#[test]
fn a_flipped_or_cut_part_of_a_signed_vector_is_a_bad_signature() {
    let seeds = signed_vectors();
    assert!(
        seeds.len() >= 8,
        "the keyed vectors and the legacy card are seeds"
    );
    for s in &seeds {
        let got = s.verify(&s.parts);
        assert!(
            !matches!(got, Err(Rejection::BadSignature(_))),
            "{s:?}: {got:?}"
        );
    }
    let inputs = (select(seeds), 0..4usize, mutate::flip_or_cut());
    fuzz(REGRESSIONS, vec![], inputs, |(signed, part, change)| {
        let mut parts = signed.parts.clone();
        parts[part] = mutate::mutated_text(&parts[part], &[change]);
        if parts == signed.parts {
            return Ok(());
        }
        let got = signed.verify(&parts);
        if part == 3 && parts[3].eq_ignore_ascii_case(&signed.parts[3]) {
            // Hex is compared case-insensitively, as the SDKs do.
            prop_assert_eq!(got, signed.verify(&signed.parts));
        } else {
            prop_assert!(matches!(got, Err(Rejection::BadSignature(_))), "{:?}", got);
        }
        Ok(())
    });
}

/// The `encrypt` member of a body, if it has one (an array's first item counts: the
/// envelope types read a JSON array positionally).
fn encrypt_member(body: &[u8]) -> Option<String> {
    let value: Value = serde_json::from_slice(body).ok()?;
    let member = value.get("encrypt").or_else(|| value.get(0))?;
    member.as_str().map(str::to_string)
}

/// Bodies for the keyed profile of the vectors: theirs mutated, their plaintexts (valid
/// envelopes, unencrypted), random `encrypt` members, arbitrary bytes and JSON.
fn bodies() -> impl Strategy<Value = Vec<u8>> {
    let mut seeds: Vec<Vec<u8>> = vectors()
        .iter()
        .flat_map(|v| ["body", "plaintext"].map(|k| v[k].as_str().map(str::as_bytes)))
        .flatten()
        .map(<[u8]>::to_vec)
        .collect();
    seeds.extend(corpus("verify").iter().map(entry_bytes));
    let blocks = vec(any::<[u8; 16]>(), 2..6).prop_map(|blocks| {
        let raw = blocks.concat();
        json!({ "encrypt": STANDARD.encode(raw) })
            .to_string()
            .into_bytes()
    });
    prop_oneof![
        3 => (select(seeds.clone()), mutate::mutations()).prop_map(|(b, m)| mutate::mutated(&b, &m)),
        1 => select(seeds),
        1 => blocks,
        1 => vec(any::<u8>(), 0..200),
        1 => json::value().prop_map(|v| v.to_string().into_bytes()),
    ]
}

#[test]
fn unsigned_requests_to_a_keyed_profile_learn_nothing_but_bad_signature() {
    // The vectors' key: mutated ciphertexts are then real ones, a bit off.
    let key = "kx9Vq2LmT7pR4sW1";
    let token = "rvaYgkND1GOiu5MM0E1rncYC6PLtF7JV";
    let aes = AesKey::derive(key);
    let creds = Credentials {
        encrypt: Some((key, &aes)),
        verification_token: token,
    };
    // At least one of the three headers missing; the others anything.
    let header = || option::of("[ -~]{0,70}");
    let headers = (header(), header(), header(), 0..3usize).prop_map(|(t, n, s, gone)| {
        let mut h = [t, n, s];
        h[gone] = None;
        h
    });
    fuzz(
        REGRESSIONS,
        vec![],
        (bodies(), headers),
        |(body, [t, n, s])| {
            let headers = SignedHeaders {
                timestamp: t.as_deref(),
                nonce: n.as_deref(),
                signature: s.as_deref(),
            };
            let got = verify_event(creds, headers, &body, ANY_TIME);
            if matches!(got, Err(Rejection::BadSignature(_))) {
                return Ok(());
            }
            // Only a body that really decrypts (to a url_verification, the one unsigned
            // request Feishu makes) gets further: a challenge, or a wrong token.
            let decrypts = encrypt_member(&body).is_some_and(|e| crypto::decrypt(&aes, &e).is_ok());
            prop_assert!(decrypts, "{:?}", got);
            prop_assert!(
                matches!(got, Ok(Verified::Challenge(_)) | Err(Rejection::BadToken)),
                "{:?}",
                got
            );
            Ok(())
        },
    );
}

const KEY: &str = "fuzz-encrypt-key-Zq81";
const TOKEN: &str = "fuzz-verification-token-Pw27";

#[test]
fn every_refusal_of_any_request_has_a_known_code_and_no_secret() {
    let aes = AesKey::derive(KEY);
    let keyed = Credentials {
        encrypt: Some((KEY, &aes)),
        verification_token: TOKEN,
    };
    let plain = Credentials {
        encrypt: None,
        verification_token: TOKEN,
    };
    let header = || option::of(prop_oneof![json::word(), "[0-9]{1,20}(\\.[0-9]{0,4})?"]);
    let inputs = (
        bodies(),
        header(),
        header(),
        header(),
        any::<i64>(),
        any::<u64>(),
    );
    fuzz(REGRESSIONS, vec![], inputs, |(body, t, n, s, now, tol)| {
        let headers = SignedHeaders {
            timestamp: t.as_deref(),
            nonce: n.as_deref(),
            signature: s.as_deref(),
        };
        let f = Freshness {
            now_secs: now,
            tolerance_secs: tol,
        };
        let outcomes = [
            verify_event(keyed, headers, &body, f),
            verify_event(plain, headers, &body, f),
            verify_card_url(keyed, headers, &body, f),
            verify_card_url(plain, headers, &body, f),
            verify_card(TOKEN, headers, &body, f),
            accept_pushed(&body, Some(&aes)).map(Verified::Event),
            accept_pushed(&body, None).map(Verified::Event),
        ];
        for got in outcomes {
            match got {
                Err(e) => {
                    let text = e.to_string();
                    prop_assert!(CODES.contains(&e.code()), "{:?}", e);
                    prop_assert!(!text.is_empty());
                    prop_assert!(!text.contains(KEY) && !text.contains(TOKEN), "{}", text);
                }
                Ok(Verified::Event(e)) => {
                    // What is stored is JSON, whatever came in (read without a depth
                    // limit: an unknown member is skipped at any depth).
                    let stored = serde_json::from_str::<IgnoredAny>(&e.payload);
                    prop_assert!(stored.is_ok(), "{}", e.payload);
                    prop_assert!(!e.event_id.is_empty() && !e.event_type.is_empty());
                }
                Ok(Verified::Challenge(_)) => {}
            }
        }
        Ok(())
    });
}

#[test]
fn the_freshness_window_holds_for_any_timestamp_header_and_clock() {
    let ts_header = prop_oneof![
        json::word(),
        "-?[0-9]{1,20}(\\.[0-9]{0,9})?",
        any::<i64>().prop_map(|n| n.to_string()),
    ];
    let create_time = option::of(prop_oneof![
        "[0-9]{1,20}",
        any::<i64>().prop_map(|n| n.to_string())
    ]);
    let tolerance = prop_oneof![Just(0), 1..1_000_000u64, any::<u64>()];
    let inputs = (option::of(ts_header), create_time, any::<i64>(), tolerance);
    fuzz(
        REGRESSIONS,
        vec![],
        inputs,
        |(ts, create_time, now, tol)| {
            let mut header = json!({"event_id": "ev-fresh", "event_type": "x", "token": TOKEN});
            if let Some(ct) = &create_time {
                header["create_time"] = json!(ct);
            }
            let body = json!({"schema": "2.0", "header": header, "event": {}}).to_string();
            let creds = Credentials {
                encrypt: None,
                verification_token: TOKEN,
            };
            let headers = SignedHeaders {
                timestamp: ts.as_deref(),
                ..SignedHeaders::default()
            };
            let f = Freshness {
                now_secs: now,
                tolerance_secs: tol,
            };
            let got = verify_event(creds, headers, body.as_bytes(), f);
            let clock = ts
                .as_deref()
                .and_then(parse_fractional_secs)
                .or(create_time.as_deref().and_then(parse_create_time));
            let fresh = tol == 0 || clock.is_some_and(|c| now.abs_diff(c) <= tol);
            prop_assert_eq!(got.is_ok(), fresh, "{:?}", got);
            if !fresh {
                prop_assert!(
                    matches!(got, Err(Rejection::StaleTimestamp(_))),
                    "{:?}",
                    got
                );
            }
            Ok(())
        },
    );
}

#[test]
fn timestamps_in_seconds_ms_or_us_read_as_the_same_second() {
    let inputs = (1_000_000_000..9_999_999_999i64, 0..1000i64, any::<String>());
    fuzz(REGRESSIONS, vec![], inputs, |(secs, sub, junk)| {
        let ms = secs * 1000 + sub;
        let us = ms * 1000 + sub;
        for raw in [secs.to_string(), ms.to_string(), us.to_string()] {
            prop_assert_eq!(parse_create_time(&raw), Some(secs), "{}", raw);
            let padded = format!(" {raw}\n");
            prop_assert_eq!(parse_create_time(&padded), Some(secs));
        }
        let fractional = format!("{secs}.{sub}");
        prop_assert_eq!(parse_fractional_secs(&fractional), Some(secs));
        // Anything else: a number or None, never a panic.
        let _ = (parse_create_time(&junk), parse_fractional_secs(&junk));
        Ok(())
    });
}
