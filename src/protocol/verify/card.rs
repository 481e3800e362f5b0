//! The legacy message-card URL (`/webhook/{profile}/card`): its own SHA-1 signed,
//! plaintext format, and — as Feishu's Node SDK allows — the event formats too.

use serde::{Deserialize, de::IgnoredAny};

use super::{
    Credentials, Freshness, Rejection, SignedHeaders, Verified, VerifiedEvent, check_fresh,
    check_token, object, verify_event,
};
use crate::protocol::{crypto, envelope::Probe, events};

/// The top-level members that mark a body in the event formats; their values are not
/// read.
#[derive(Deserialize)]
struct EventFormat {
    encrypt: Option<IgnoredAny>,
    schema: Option<IgnoredAny>,
}

/// Verifies a callback on the legacy message-card URL (`/webhook/{profile}/card`), which
/// also takes the event formats, as Feishu's Node SDK does: a body with a top-level
/// `encrypt` or `schema` member is an encrypted or schema 2.0 callback, verified like an
/// event ([`verify_event`]: SHA-256 signature keyed by the Encrypt Key, decryption, token);
/// any other body is a legacy card callback ([`verify_card`]). Only the top-level keys
/// are looked at before the signature check; a body that is not a JSON object goes the
/// legacy way, where the signature is checked first.
pub fn verify_card_url(
    creds: Credentials<'_>,
    headers: SignedHeaders<'_>,
    body: &[u8],
    freshness: Freshness,
) -> Result<Verified, Rejection> {
    let event_format =
        object::<EventFormat>(body).is_some_and(|f| f.encrypt.is_some() || f.schema.is_some());
    if event_format {
        verify_event(creds, headers, body, freshness)
    } else {
        verify_card(creds.verification_token, headers, body, freshness)
    }
}

/// Verifies a legacy message-card callback: plaintext JSON, SHA-1 signature keyed by the
/// Verification Token.
pub fn verify_card(
    verification_token: &str,
    headers: SignedHeaders<'_>,
    body: &[u8],
    freshness: Freshness,
) -> Result<Verified, Rejection> {
    let signed = match (headers.timestamp, headers.nonce, headers.signature) {
        (Some(ts), Some(nonce), Some(sig)) => {
            let expected = crypto::card_signature(ts, nonce, verification_token, body);
            if !crypto::signature_matches(&expected, sig) {
                return Err(Rejection::BadSignature("X-Lark-Signature does not match"));
            }
            Some((ts, nonce))
        }
        _ => None,
    };
    let probe: Probe =
        object(body).ok_or_else(|| Rejection::MalformedJson("body is not a JSON object".into()))?;
    if probe.kind.as_deref() == Some("url_verification") {
        let challenge = probe
            .challenge
            .ok_or_else(|| Rejection::MalformedJson("challenge missing".into()))?;
        check_token(
            probe.token.as_deref().unwrap_or_default(),
            verification_token,
        )?;
        return Ok(Verified::Challenge(challenge));
    }
    let Some((ts, nonce)) = signed else {
        return Err(Rejection::BadSignature("X-Lark-Signature missing"));
    };
    check_fresh(Some(ts), None, freshness)?;
    let payload = std::str::from_utf8(body)
        .map_err(|_| Rejection::MalformedJson("body is not UTF-8".into()))?
        .to_string();
    // Legacy callbacks carry no event id; the signed (timestamp, nonce, body) triple
    // identifies one delivery, so a replay of the same request is a duplicate.
    let id = crypto::event_signature(ts, nonce, "", body);
    Ok(Verified::Event(VerifiedEvent {
        schema: None,
        event_id: format!("card-v1:{}", &id[..32]),
        event_type: events::CARD_ACTION_LEGACY.to_string(),
        message_id: None,
        chat_key: String::new(),
        payload,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::crypto::AesKey;

    const KEY: &str = "unit-key";
    const VT: &str = "unit-verification-token";

    fn sign(body: &str) -> String {
        crypto::event_signature("1", "2", KEY, body.as_bytes())
    }

    /// Verifies `body` on the card URL of a keyed profile, signed by `sign` (or not).
    fn on_card_url(
        sign: Option<&dyn Fn(&str) -> String>,
        body: &str,
    ) -> Result<Verified, Rejection> {
        let aes = AesKey::derive(KEY);
        let creds = Credentials {
            encrypt: Some((KEY, &aes)),
            verification_token: VT,
        };
        let signature = sign.map(|f| f(body));
        let headers = SignedHeaders {
            timestamp: Some("1"),
            nonce: Some("2"),
            signature: signature.as_deref(),
        };
        let freshness = Freshness {
            now_secs: 0,
            tolerance_secs: 0,
        };
        verify_card_url(creds, headers, body.as_bytes(), freshness)
    }

    #[test]
    fn the_card_url_verifies_each_format_its_own_way() {
        let plaintext = format!(
            r#"{{"schema":"2.0","header":{{"event_id":"e1","token":"{VT}","event_type":"card.action.trigger"}},"event":{{}}}}"#
        );
        let (encrypted, _) = crypto::seal(Some(KEY), "1", "2", [7; 16], &plaintext);
        let sha256 = |b: &str| sign(b);
        let sha1 = |b: &str| crypto::card_signature("1", "2", VT, b.as_bytes());
        for body in [encrypted.as_str(), plaintext.as_str()] {
            let Ok(Verified::Event(e)) = on_card_url(Some(&sha256), body) else {
                panic!("accepted: {body}");
            };
            assert_eq!(
                (e.event_id.as_str(), e.event_type.as_str()),
                ("e1", "card.action.trigger")
            );
            for refused in [on_card_url(Some(&sha1), body), on_card_url(None, body)] {
                assert!(
                    matches!(refused, Err(Rejection::BadSignature(_))),
                    "{refused:?}"
                );
            }
        }
        let legacy = r#"{"open_id":"ou_1","token":"c-1","action":{"value":{},"tag":"button"}}"#;
        let Ok(Verified::Event(e)) = on_card_url(Some(&sha1), legacy) else {
            panic!("legacy accepted");
        };
        assert_eq!(e.event_type, events::CARD_ACTION_LEGACY);
        assert!(matches!(
            on_card_url(Some(&sha256), legacy),
            Err(Rejection::BadSignature(_))
        ));
    }
}
