//! `protocol::crypto`: AES-256-CBC of the `encrypt` field and the two signatures.

use base64::{Engine, engine::general_purpose::STANDARD};
use feishu_bridge::protocol::crypto::{
    AesKey, DecryptError, card_signature, decrypt, encrypt, event_signature, signature_matches,
};
use proptest::{collection::vec, prelude::*, sample::select};

use crate::{
    mutate::{self, Mutation},
    regressions,
    support::{corpus, fuzz, vectors},
};

const REGRESSIONS: &str = regressions!("crypto");

/// Every `encrypt` string of the vectors and of the corpus, with its Encrypt Key
/// (the corpus entries are tried under the first vector key).
fn seed_ciphertexts() -> Vec<(String, String)> {
    let mut seeds: Vec<(String, String)> = vectors()
        .iter()
        .filter_map(|v| {
            let key = v["encrypt_key"].as_str().filter(|k| !k.is_empty())?;
            Some((key.to_string(), v["encrypt"].as_str()?.to_string()))
        })
        .collect();
    let key = seeds.first().map(|s| s.0.clone()).expect("a keyed vector");
    for entry in corpus("crypto") {
        if let Some(text) = entry["encrypt"].as_str() {
            seeds.push((key.clone(), text.to_string()));
        }
    }
    seeds
}

/// What `decrypt` must answer for `input`, judged from its base64 layer alone: the
/// exact error for a bad encoding or length, else "bytes or bad padding".
fn decrypt_is_explained(key: &str, input: &str) -> Result<(), TestCaseError> {
    let got = decrypt(&AesKey::derive(key), input);
    let Ok(raw) = STANDARD.decode(input) else {
        prop_assert_eq!(got, Err(DecryptError::Base64));
        return Ok(());
    };
    if raw.len() < 32 || raw.len() % 16 != 0 {
        prop_assert_eq!(got, Err(DecryptError::Length));
        return Ok(());
    }
    match got {
        // 16 bytes of IV, then at least one byte of padding and at most one block of it.
        Ok(plain) => prop_assert!((raw.len() - 32..=raw.len() - 17).contains(&plain.len())),
        Err(e) => prop_assert_eq!(e, DecryptError::Padding),
    }
    Ok(())
}

#[test]
fn decrypt_gives_bytes_or_the_one_error_its_input_earns() {
    let seeds = seed_ciphertexts();
    let from_seeds = (select(seeds.clone()), mutate::mutations())
        .prop_map(|((key, text), m)| (key, mutate::mutated_text(&text, &m)));
    let any_bytes = vec(any::<u8>(), 0..120).prop_map(|b| STANDARD.encode(b));
    let key = select(seeds.iter().map(|s| s.0.clone()).collect::<Vec<_>>());
    let inputs = prop_oneof![
        (key.clone(), any::<String>()),
        (key.clone(), "[A-Za-z0-9+/=]{0,90}"),
        (key, any_bytes),
        from_seeds,
    ];
    fuzz(REGRESSIONS, seeds, inputs, |(key, input)| {
        decrypt_is_explained(&key, &input)
    });
}

#[test]
fn encrypt_then_decrypt_round_trips_any_plaintext_under_any_key() {
    let seeds = vectors()
        .iter()
        .filter_map(|v| {
            let key = v["encrypt_key"].as_str().filter(|k| !k.is_empty())?;
            let iv = hex::decode(v["iv_hex"].as_str()?).ok()?.try_into().ok()?;
            let plain = v["plaintext"].as_str()?.as_bytes().to_vec();
            // The vector's own ciphertext is what we produce from its IV and plaintext.
            let expected = v["encrypt"].as_str()?.to_string();
            assert_eq!(
                encrypt(&AesKey::derive(key), iv, &plain),
                expected,
                "{}",
                v["name"]
            );
            Some((key.to_string(), iv, plain))
        })
        .collect();
    let inputs = (any::<String>(), any::<[u8; 16]>(), vec(any::<u8>(), 0..600));
    fuzz(REGRESSIONS, seeds, inputs, |(key, iv, plain)| {
        let aes = AesKey::derive(&key);
        let sealed = encrypt(&aes, iv, &plain);
        let raw = STANDARD.decode(&sealed).expect("our own base64");
        prop_assert_eq!(&raw[..16], &iv[..], "the IV leads");
        prop_assert_eq!(
            raw.len(),
            16 + (plain.len() / 16 + 1) * 16,
            "PKCS#7 always pads"
        );
        prop_assert_eq!(decrypt(&aes, &sealed), Ok(plain));
        Ok(())
    });
}

/// A change to a valid `encrypt` string: of its base64 text, or of the bytes under it.
#[derive(Debug, Clone)]
enum Tamper {
    Text(Mutation),
    Bytes(Mutation),
    /// Drops whole 16-byte blocks from the end.
    DropBlocks(usize),
    /// Decrypts under another Encrypt Key.
    OtherKey(String),
}

#[test]
fn a_changed_ciphertext_or_another_key_never_yields_the_plaintext() {
    // CBC has no integrity check, so a change may well decrypt; but for one key the map
    // from (IV, ciphertext) to padded plaintext is one-to-one, and a strict PKCS#7 strip
    // of a same-length result cannot give back the original: any change must show.
    let tamper = prop_oneof![
        mutate::flip_or_cut().prop_map(Tamper::Text),
        mutate::mutation().prop_map(Tamper::Bytes),
        (1..4usize).prop_map(Tamper::DropBlocks),
        any::<String>().prop_map(Tamper::OtherKey),
    ];
    let inputs = (
        "[ -~]{0,24}",
        any::<[u8; 16]>(),
        vec(any::<u8>(), 0..100),
        tamper,
    );
    fuzz(REGRESSIONS, vec![], inputs, |(key, iv, plain, tamper)| {
        let aes = AesKey::derive(&key);
        let sealed = encrypt(&aes, iv, &plain);
        let (changed, under) = match tamper {
            Tamper::Text(m) => (mutate::mutated_text(&sealed, &[m]), key.clone()),
            Tamper::Bytes(m) => {
                let raw = STANDARD.decode(&sealed).expect("base64");
                (STANDARD.encode(mutate::mutated(&raw, &[m])), key.clone())
            }
            Tamper::DropBlocks(n) => {
                let raw = STANDARD.decode(&sealed).expect("base64");
                let keep = raw.len().saturating_sub(16 * n);
                (STANDARD.encode(&raw[..keep]), key.clone())
            }
            Tamper::OtherKey(other) => (sealed.clone(), other),
        };
        if changed == sealed && under == key {
            return Ok(());
        }
        let got = decrypt(&AesKey::derive(&under), &changed);
        prop_assert_ne!(got.as_deref().ok(), Some(&plain[..]), "{:?}", got);
        decrypt_is_explained(&under, &changed)
    });
}

/// Any header-ish text: printable ASCII, any Unicode, or a number.
fn text() -> impl Strategy<Value = String> {
    prop_oneof![
        "[ -~]{0,40}",
        any::<String>(),
        any::<u64>().prop_map(|n| n.to_string())
    ]
}

#[test]
fn signatures_are_fixed_length_lowercase_hex_of_any_input() {
    let inputs = (text(), text(), text(), vec(any::<u8>(), 0..300));
    fuzz(REGRESSIONS, vec![], inputs, |(ts, nonce, secret, body)| {
        let event = event_signature(&ts, &nonce, &secret, &body);
        let card = card_signature(&ts, &nonce, &secret, &body);
        for (sig, len) in [(&event, 64), (&card, 40)] {
            prop_assert_eq!(sig.len(), len);
            prop_assert!(
                sig.bytes()
                    .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
            );
            prop_assert!(signature_matches(sig, sig));
            let shouted = format!(" {}\t", sig.to_uppercase());
            prop_assert!(signature_matches(sig, &shouted));
        }
        // The concatenation is what is signed: moving a byte across a boundary is the
        // same input, which is why the secret sits between nonce and body.
        let joined = format!("{ts}{nonce}{secret}");
        prop_assert_eq!(&event, &event_signature(&joined, "", "", &body));
        Ok(())
    });
}

#[test]
fn a_bit_flip_in_a_signature_is_refused_unless_it_only_changes_case() {
    let sigs: Vec<String> = vectors()
        .iter()
        .filter_map(|v| v["expected_signature"].as_str().map(str::to_string))
        .collect();
    let fresh = (text(), vec(any::<u8>(), 0..64), any::<bool>()).prop_map(|(t, b, sha1)| {
        if sha1 {
            card_signature(&t, "n", "k", &b)
        } else {
            event_signature(&t, "n", "k", &b)
        }
    });
    let inputs = (
        prop_oneof![select(sigs), fresh],
        any::<usize>(),
        0..8u8,
        any::<String>(),
    );
    fuzz(REGRESSIONS, vec![], inputs, |(sig, at, bit, junk)| {
        let mut flipped = sig.clone().into_bytes();
        let at = at % flipped.len();
        let before = flipped[at];
        flipped[at] ^= 1 << bit;
        let received = String::from_utf8_lossy(&flipped);
        let case_twin = before.is_ascii_lowercase() && flipped[at] == before.to_ascii_uppercase();
        prop_assert_eq!(
            signature_matches(&sig, &received),
            case_twin,
            "{}",
            received
        );
        // Arbitrary text never panics and never matches unless it is the signature.
        let matches = signature_matches(&sig, &junk);
        prop_assert_eq!(matches, junk.trim().eq_ignore_ascii_case(&sig));
        Ok(())
    });
}
