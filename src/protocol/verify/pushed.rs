//! Events pushed over the long connection. The connection was authenticated when it was
//! made (with the app secret), and Feishu sends its pushes as plaintext JSON without a
//! signature; a push is read like a verified callback's plaintext, and its Verification
//! Token is cut out before it is stored, as for every callback. Should a push arrive
//! encrypted (`{"encrypt": …}`, which the docs say it is not, but the Node SDK would
//! decrypt), it is decrypted with the profile's Encrypt Key.

use super::{Outer, Rejection, VerifiedEvent, not_an_object, object};
use crate::protocol::{
    crypto::{self, AesKey},
    envelope::{self, Classified, Probe},
    strip,
};

/// The event in a pushed payload, ready for the inbox.
pub fn accept_pushed(payload: &[u8], aes: Option<&AesKey>) -> Result<VerifiedEvent, Rejection> {
    let outer: Outer = object(payload).ok_or_else(not_an_object)?;
    let plaintext = match (outer.encrypt, aes) {
        (Some(enc), Some(aes)) => crypto::decrypt(aes, &enc)
            .map_err(|_| Rejection::Undecryptable("encrypt field could not be decrypted"))?,
        (Some(_), None) => {
            return Err(Rejection::Undecryptable(
                "push is encrypted but the profile has no encrypt_key",
            ));
        }
        (None, _) => payload.to_vec(),
    };
    let probe: Probe = object(&plaintext)
        .ok_or_else(|| Rejection::MalformedJson("push is not a JSON object".into()))?;
    let classified = envelope::classify(probe).map_err(|envelope::EnvelopeError::Missing(f)| {
        Rejection::MalformedJson(format!("not a Feishu event: {f} missing"))
    })?;
    let Classified::Event {
        schema,
        event_id,
        event_type,
        message_id,
        chat_key,
        ..
    } = classified
    else {
        return Err(Rejection::MalformedJson(
            "a url_verification challenge cannot come over the long connection".into(),
        ));
    };
    let text = String::from_utf8(plaintext)
        .map_err(|_| Rejection::MalformedJson("push is not UTF-8".into()))?;
    let payload = strip::without_verification_token(&text).ok_or_else(not_an_object)?;
    Ok(VerifiedEvent {
        schema: Some(schema),
        event_id,
        event_type,
        message_id,
        chat_key,
        payload,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_push_is_read_like_a_callback_and_stored_without_its_token() {
        let push = r#"{"schema":"2.0","header":{"event_id":"e1","token":"vt-secret","event_type":"im.message.receive_v1"},"event":{"message":{"message_id":"om_1","chat_id":"oc_1"}}}"#;
        let e = accept_pushed(push.as_bytes(), None).expect("accepted");
        assert_eq!(
            (e.event_id.as_str(), e.event_type.as_str()),
            ("e1", "im.message.receive_v1")
        );
        assert!(!e.payload.contains("vt-secret"), "{}", e.payload);
        let key = AesKey::derive("k");
        let (sealed, _) = crypto::seal(Some("k"), "1", "2", [3; 16], push);
        let e = accept_pushed(sealed.as_bytes(), Some(&key)).expect("decrypted");
        assert_eq!(e.event_id, "e1");
        assert!(matches!(
            accept_pushed(sealed.as_bytes(), None),
            Err(Rejection::Undecryptable(_))
        ));
        for bad in [
            "not json",
            r#"{"type":"url_verification","challenge":"c","token":"t"}"#,
            "{}",
        ] {
            assert!(accept_pushed(bad.as_bytes(), None).is_err(), "{bad}");
        }
    }
}
