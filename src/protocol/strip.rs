//! Taking the Verification Token out of an authenticated envelope before it is stored.
//!
//! Without an Encrypt Key the Verification Token is a profile's only credential, and
//! every envelope carries it: schema 2.0 in `header.token`, schema 1.0 (and the
//! challenge) as the top-level `token`. Once the envelope is verified the bridge has no
//! further use for it, so the member is removed and the document written again: the same
//! members, every value byte for byte as received, the envelope's own keys in sorted
//! order (no reader of it depends on their order).
//!
//! Card-update tokens are not touched: `event.token` of `card.action.trigger` and the
//! top-level `token` of a legacy card callback (which goes through `verify_card`, not
//! here) are `c-…` tokens for a delayed card update, not the profile's credential.

use std::collections::BTreeMap;

use serde_json::value::RawValue;

/// An object's members, each value kept as the exact JSON text it arrived as.
type Members = BTreeMap<String, Box<RawValue>>;

/// `json`, an envelope, without its top-level `token` and without `header.token`;
/// `None` when it is not a JSON object. Only the envelope and its header are decoded:
/// every other value is copied as received.
pub fn without_verification_token(json: &str) -> Option<String> {
    let mut envelope: Members = serde_json::from_str(json).ok()?;
    envelope.remove("token");
    if let Some(header) = envelope.get_mut("header")
        && let Ok(mut members) = serde_json::from_str::<Members>(header.get())
        && members.remove("token").is_some()
    {
        *header = serde_json::value::to_raw_value(&members).ok()?;
    }
    serde_json::to_string(&envelope).ok()
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::without_verification_token as strip;

    fn stripped(json: &str) -> Value {
        serde_json::from_str(&strip(json).expect("an object")).expect("still valid JSON")
    }

    #[test]
    fn schema_2_loses_header_token_and_keeps_everything_else() {
        let v2 = r#"{"schema":"2.0","header":{"event_id":"e1","token":"VT","create_time":"1"},"event":{"token":"c-card","text":"a \"token\": {x}"}}"#;
        assert_eq!(
            stripped(v2),
            json!({"schema":"2.0","header":{"event_id":"e1","create_time":"1"},
                   "event":{"token":"c-card","text":"a \"token\": {x}"}})
        );
        assert_eq!(
            stripped(r#"{"header":{"token":"VT"}}"#),
            json!({"header":{}})
        );
    }

    #[test]
    fn schema_1_loses_the_top_level_token_however_it_is_spelled() {
        let v1 =
            r#"{"ts":"1.5","uuid":"u","token":"VT","type":"event_callback","event":{"type":"x"}}"#;
        assert_eq!(
            stripped(v1),
            json!({"ts":"1.5","uuid":"u","type":"event_callback","event":{"type":"x"}})
        );
        let escaped = r#"{"uuid":"u","event":{},"tok\u0065n":"VT"}"#;
        assert_eq!(stripped(escaped), json!({"uuid":"u","event":{}}));
        let out = strip(r#"{"token":"VT","header":{"token":"VT"},"token":"VT"}"#).expect("object");
        assert!(!out.contains("VT"), "{out}");
    }

    #[test]
    fn a_document_without_tokens_keeps_its_content_and_a_non_object_is_refused() {
        let doc = json!({"schema":"2.0","header":{"event_id":"e"},
                         "event":{"n":-1.5e3,"big":9007199254740993u64,"b":[true,null],"s":"飞书\u{0}"}});
        assert_eq!(stripped(&doc.to_string()), doc);
        assert_eq!(strip(r#"["2.0",{"token":"VT"}]"#), None);
    }
}
