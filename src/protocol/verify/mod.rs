//! Turning raw callback bytes into a [`Verified`] value, or a [`Rejection`].
//!
//! Order matters. The signature is checked over the raw bytes before anything is
//! decrypted or parsed. An *unsigned* request to a profile with an Encrypt Key can only
//! be a `url_verification` (Feishu signs everything else); for such a request every
//! failure — bad base64, bad padding, bad JSON, not a challenge — is answered with the
//! same `bad_signature`, so the endpoint is not a CBC padding oracle. Token and freshness
//! are checked only once the request is authenticated, and the token is then cut out of
//! the payload that is stored (see [`super::strip`]).

use serde::Deserialize;

use super::{
    crypto::{self, AesKey},
    envelope::{self, Classified, Probe, Schema},
    strip,
};

mod card;
mod pushed;

pub use card::{verify_card, verify_card_url};
pub use pushed::accept_pushed;

/// What authenticates one profile's callbacks.
#[derive(Debug, Clone, Copy)]
pub struct Credentials<'a> {
    /// The Encrypt Key and its derived AES key, when configured.
    pub encrypt: Option<(&'a str, &'a AesKey)>,
    pub verification_token: &'a str,
}

/// The three `X-Lark-*` headers, as received.
#[derive(Debug, Clone, Copy, Default)]
pub struct SignedHeaders<'a> {
    /// `X-Lark-Request-Timestamp`
    pub timestamp: Option<&'a str>,
    /// `X-Lark-Request-Nonce`
    pub nonce: Option<&'a str>,
    /// `X-Lark-Signature`
    pub signature: Option<&'a str>,
}

/// Freshness policy.
#[derive(Debug, Clone, Copy)]
pub struct Freshness {
    /// Now, Unix seconds.
    pub now_secs: i64,
    /// Allowed skew; 0 disables the check.
    pub tolerance_secs: u64,
}

/// A callback that passed every check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verified {
    /// `url_verification`: answer `{"challenge": …}`.
    Challenge(String),
    /// An event to store.
    Event(VerifiedEvent),
}

/// An authenticated event, ready for the inbox.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VerifiedEvent {
    /// Envelope schema (`None` for legacy card callbacks).
    pub schema: Option<Schema>,
    /// v2 `header.event_id`, v1 `uuid`, or a derived id for legacy card callbacks.
    pub event_id: String,
    /// `im.message.receive_v1`, …
    pub event_type: String,
    /// For message events: the message id (Feishu's recommended dedup key).
    pub message_id: Option<String>,
    /// The chat whose order it takes part in (message and recall events; else '').
    pub chat_key: String,
    /// The decrypted JSON less the Verification Token (`header.token`, or the top-level
    /// `token` of schema 1.0); every other member and value as received.
    pub payload: String,
}

/// Why a callback was refused. Maps one-to-one onto the HTTP error codes.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Rejection {
    /// Signature missing or wrong.
    #[error("{0}")]
    BadSignature(&'static str),
    /// Verification token wrong.
    #[error("verification token does not match")]
    BadToken,
    /// Timestamp outside the window.
    #[error("{0}")]
    StaleTimestamp(&'static str),
    /// The body could not be decrypted.
    #[error("{0}")]
    Undecryptable(&'static str),
    /// The body is not a callback we can read.
    #[error("{0}")]
    MalformedJson(String),
}

impl Rejection {
    /// The stable error code a refused callback is answered with.
    pub fn code(&self) -> &'static str {
        match self {
            Self::BadSignature(_) => "bad_signature",
            Self::BadToken => "bad_token",
            Self::StaleTimestamp(_) => "stale_timestamp",
            Self::Undecryptable(_) => "undecryptable",
            Self::MalformedJson(_) => "malformed_json",
        }
    }
}

#[derive(Deserialize)]
struct Outer {
    #[serde(default)]
    encrypt: Option<String>,
}

/// Verifies an event-subscription callback (`/webhook/{profile}/event`).
pub fn verify_event(
    creds: Credentials<'_>,
    headers: SignedHeaders<'_>,
    body: &[u8],
    freshness: Freshness,
) -> Result<Verified, Rejection> {
    let (plaintext, signed) = match creds.encrypt {
        Some((encrypt_key, aes)) => decrypted_body(encrypt_key, aes, headers, body)?,
        None => (unencrypted_body(body)?, false),
    };
    // An unsigned request to a profile with an Encrypt Key: every failure past this
    // point is answered like a missing signature (no padding or parsing oracle).
    let unsigned_encrypted = creds.encrypt.is_some() && !signed;
    match classified(&plaintext, unsigned_encrypted)? {
        Classified::Challenge { challenge, token } => {
            check_token(&token, creds.verification_token)?;
            Ok(Verified::Challenge(challenge))
        }
        Classified::Event {
            schema,
            event_id,
            event_type,
            token,
            message_id,
            chat_key,
            create_time_secs,
        } => {
            if unsigned_encrypted {
                return Err(unsigned());
            }
            check_token(&token, creds.verification_token)?;
            check_fresh(headers.timestamp, create_time_secs, freshness)?;
            let payload = String::from_utf8(plaintext)
                .map_err(|_| Rejection::MalformedJson("body is not UTF-8".into()))?;
            let payload = strip::without_verification_token(&payload).ok_or_else(not_an_object)?;
            Ok(Verified::Event(VerifiedEvent {
                schema: Some(schema),
                event_id,
                event_type,
                message_id,
                chat_key,
                payload,
            }))
        }
    }
}

/// The plaintext of a body to a profile with an Encrypt Key, and whether it was signed.
fn decrypted_body(
    encrypt_key: &str,
    aes: &AesKey,
    headers: SignedHeaders<'_>,
    body: &[u8],
) -> Result<(Vec<u8>, bool), Rejection> {
    // The signature covers the raw bytes, so it is checked before they are parsed: an
    // unsigned body that is not even JSON is refused like any unsigned one.
    let signed = signature_checked(encrypt_key, headers, body)?;
    let outer = match object::<Outer>(body) {
        Some(outer) => outer,
        None if signed => return Err(not_an_object()),
        None => return Err(unsigned()),
    };
    let plaintext = match outer.encrypt {
        Some(enc) => match crypto::decrypt(aes, &enc) {
            Ok(p) => p,
            Err(_) if signed => {
                return Err(Rejection::Undecryptable(
                    "encrypt field could not be decrypted",
                ));
            }
            Err(_) => return Err(unsigned()),
        },
        None if signed => body.to_vec(),
        None => return Err(unsigned()),
    };
    Ok((plaintext, signed))
}

/// Whether the request carries all three signature headers; an error when it does and
/// the signature does not match.
fn signature_checked(
    encrypt_key: &str,
    headers: SignedHeaders<'_>,
    body: &[u8],
) -> Result<bool, Rejection> {
    let (Some(ts), Some(nonce), Some(sig)) = (headers.timestamp, headers.nonce, headers.signature)
    else {
        return Ok(false);
    };
    let expected = crypto::event_signature(ts, nonce, encrypt_key, body);
    if !crypto::signature_matches(&expected, sig) {
        return Err(Rejection::BadSignature("X-Lark-Signature does not match"));
    }
    Ok(true)
}

/// The body to a profile without an Encrypt Key, which must not be encrypted.
fn unencrypted_body(body: &[u8]) -> Result<Vec<u8>, Rejection> {
    let outer: Outer = object(body).ok_or_else(not_an_object)?;
    if outer.encrypt.is_some() {
        return Err(Rejection::Undecryptable(
            "body is encrypted but the profile has no encrypt_key",
        ));
    }
    Ok(body.to_vec())
}

/// The plaintext read as a challenge or an event. When `unsigned_encrypted`, whatever
/// does not read is refused as unsigned.
fn classified(plaintext: &[u8], unsigned_encrypted: bool) -> Result<Classified, Rejection> {
    let probe: Probe = match object(plaintext) {
        Some(p) => p,
        None if unsigned_encrypted => return Err(unsigned()),
        None => {
            return Err(Rejection::MalformedJson(
                "decrypted body is not a JSON object".into(),
            ));
        }
    };
    match envelope::classify(probe) {
        Ok(c) => Ok(c),
        Err(_) if unsigned_encrypted => Err(unsigned()),
        Err(envelope::EnvelopeError::Missing(field)) => Err(Rejection::MalformedJson(format!(
            "not a Feishu callback: {field} missing"
        ))),
    }
}

/// `bytes` read as `T` when they hold a JSON object. Serde reads a struct from a JSON
/// array too, field by field in order; no callback is an array.
fn object<T: serde::de::DeserializeOwned>(bytes: &[u8]) -> Option<T> {
    let first = bytes.iter().find(|b| !b.is_ascii_whitespace());
    if first != Some(&b'{') {
        return None;
    }
    serde_json::from_slice(bytes).ok()
}

fn not_an_object() -> Rejection {
    Rejection::MalformedJson("body is not a JSON object".into())
}

fn unsigned() -> Rejection {
    Rejection::BadSignature("X-Lark-Signature missing or invalid")
}

/// The token must match, and an empty expected token (a long-connection profile with
/// none configured) matches nothing.
fn check_token(received: &str, expected: &str) -> Result<(), Rejection> {
    if !expected.is_empty() && crypto::ct_eq(received.as_bytes(), expected.as_bytes()) {
        Ok(())
    } else {
        Err(Rejection::BadToken)
    }
}

/// The request timestamp header is the clock of record; without a numeric one, the
/// envelope's own create time is used.
fn check_fresh(
    header_ts: Option<&str>,
    create_time_secs: Option<i64>,
    f: Freshness,
) -> Result<(), Rejection> {
    if f.tolerance_secs == 0 {
        return Ok(());
    }
    let ts = header_ts
        .and_then(envelope::parse_fractional_secs)
        .or(create_time_secs)
        .ok_or(Rejection::StaleTimestamp(
            "request carries no usable timestamp",
        ))?;
    if f.now_secs.abs_diff(ts) > f.tolerance_secs {
        return Err(Rejection::StaleTimestamp(
            "request timestamp is outside the allowed window",
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: &str = "unit-key";
    const VT: &str = "unit-verification-token";

    /// Verifies `body` for a profile with (or without) `key`, with a signature or none.
    fn check(
        key: Option<&str>,
        signature: Option<&str>,
        body: &str,
    ) -> Result<Verified, Rejection> {
        let aes = key.map(AesKey::derive);
        let creds = Credentials {
            encrypt: key.zip(aes.as_ref()),
            verification_token: VT,
        };
        let headers = SignedHeaders {
            timestamp: signature.map(|_| "1"),
            nonce: signature.map(|_| "2"),
            signature,
        };
        let freshness = Freshness {
            now_secs: 0,
            tolerance_secs: 0,
        };
        verify_event(creds, headers, body.as_bytes(), freshness)
    }

    fn sign(body: &str) -> String {
        crypto::event_signature("1", "2", KEY, body.as_bytes())
    }

    #[test]
    fn a_json_array_is_no_callback_whatever_it_holds() {
        // Serde would read these positionally as `{"encrypt": …}` or as an envelope.
        let encrypted = crypto::encrypt(&AesKey::derive(KEY), [7; 16], b"{}");
        let bodies = [
            format!("[\"{encrypted}\"]"),
            r#"["2.0", {"event_id":"e","token":"t","event_type":"x"}]"#.to_string(),
            " \n[]".to_string(),
        ];
        for body in &bodies {
            let signed = check(Some(KEY), Some(&sign(body)), body);
            assert!(
                matches!(&signed, Err(Rejection::MalformedJson(m)) if m == "body is not a JSON object"),
                "{body}: {signed:?}"
            );
            let plain = check(None, None, body);
            assert!(
                matches!(&plain, Err(Rejection::MalformedJson(_))),
                "{body}: {plain:?}"
            );
            assert_eq!(plain.err().map(|r| r.code()), Some("malformed_json"));
        }
    }

    #[test]
    fn an_unsigned_non_json_body_to_a_keyed_profile_is_a_bad_signature() {
        let body = "{not json";
        assert!(matches!(
            check(Some(KEY), None, body),
            Err(Rejection::BadSignature(_))
        ));
        assert!(matches!(
            check(Some(KEY), Some(&sign(body)), body),
            Err(Rejection::MalformedJson(_))
        ));
        assert!(matches!(
            check(None, None, body),
            Err(Rejection::MalformedJson(_))
        ));
    }

    #[test]
    fn the_stored_payload_has_no_verification_token() {
        let plaintext = format!(
            r#"{{"schema":"2.0","header":{{"event_id":"e1","token":"{VT}","event_type":"im.message.receive_v1"}},"event":{{"k":1}}}}"#
        );
        let (body, signature) = crypto::seal(Some(KEY), "1", "2", [7; 16], &plaintext);
        let Ok(Verified::Event(e)) = check(Some(KEY), Some(&signature), &body) else {
            panic!("accepted");
        };
        let stored: serde_json::Value = serde_json::from_str(&e.payload).expect("JSON");
        assert_eq!(
            stored,
            serde_json::json!({"schema":"2.0","header":{"event_id":"e1","event_type":"im.message.receive_v1"},"event":{"k":1}})
        );
        let v1 = format!(
            r#"{{"uuid":"u1","token":"{VT}","type":"event_callback","event":{{"type":"x"}}}}"#
        );
        let Ok(Verified::Event(e)) = check(None, None, &v1) else {
            panic!("accepted");
        };
        let stored: serde_json::Value = serde_json::from_str(&e.payload).expect("JSON");
        assert_eq!(
            stored,
            serde_json::json!({"uuid":"u1","type":"event_callback","event":{"type":"x"}})
        );
    }
}
