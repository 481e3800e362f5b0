//! Failures told by kind and path: serde_json's and serde_urlencoded's, never a value.

use std::collections::HashMap;

use serde::Deserialize;

use super::*;

const MARKER: &str = "SECRET-MARKER-7f3a";

#[derive(Debug, Deserialize)]
#[allow(dead_code)]
struct Doc {
    message: Message,
    #[serde(default)]
    labels: HashMap<String, u8>,
    #[serde(default)]
    pair: Option<(String, String)>,
    #[serde(default)]
    mode: Option<Mode>,
}

#[derive(Debug, Deserialize)]
#[allow(dead_code)]
#[serde(deny_unknown_fields)]
struct Message {
    chat_id: String,
    #[serde(default)]
    mentions: Vec<Mention>,
}

#[derive(Debug, Deserialize)]
#[allow(dead_code)]
struct Mention {
    name: String,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "snake_case")]
enum Mode {
    Shared,
    OwnerOnly,
}

fn fail(json: &str) -> String {
    let err = from_json::<Doc>(json).expect_err("must fail");
    let text = err.to_string();
    assert!(!text.contains(MARKER), "{text}");
    text
}

#[test]
fn wrong_types_name_the_path_and_kinds_never_the_value() {
    let m =
        format!(r#"{{"message":{{"chat_id":"c","mentions":[{{"name":{{"k":"{MARKER}"}}}}]}}}}"#);
    assert_eq!(
        fail(&m),
        "wrong type at message.mentions[0].name: expected a string, found a map"
    );
    let s = format!(r#"{{"message":{{"chat_id":"c","mentions":"{MARKER}, expected x"}}}}"#);
    assert_eq!(
        fail(&s),
        "wrong type at message.mentions: expected a sequence, found a string"
    );
    assert_eq!(
        fail(r#"{"message":{"chat_id":7301}}"#),
        "wrong type at message.chat_id: expected a string, found an integer"
    );
    assert_eq!(
        fail(r#"{"message":{"chat_id":null}}"#),
        "wrong type at message.chat_id: expected a string, found null"
    );
}

#[test]
fn every_other_serde_class_is_value_free() {
    let v = format!(r#"{{"message":{{"chat_id":"c"}},"mode":"{MARKER}"}}"#);
    assert_eq!(
        fail(&v),
        "unknown variant at mode: expected `shared` or `owner_only`"
    );
    let u = format!(r#"{{"message":{{"chat_id":"c","{MARKER}":1}}}}"#);
    assert_eq!(fail(&u), "unknown field at message");
    assert_eq!(
        fail(r#"{"message":{}}"#),
        "missing field chat_id at message"
    );
    assert_eq!(
        fail(r#"{"message":{"chat_id":"a","chat_id":"b"}}"#),
        "duplicate field chat_id at message"
    );
    let len = format!(r#"{{"message":{{"chat_id":"c"}},"pair":["{MARKER}"]}}"#);
    assert_eq!(
        fail(&len),
        "wrong length at pair: expected a tuple of size 2"
    );
    let range = r#"{"message":{"chat_id":"c"},"labels":{"a":73019}}"#;
    assert_eq!(
        fail(range),
        "invalid value at labels.a: expected u8, found an integer"
    );
    let syntax = format!(r#"{{"message":{{"chat_id":"{MARKER}"#);
    assert!(fail(&syntax).starts_with("malformed JSON at line 1 column"));
    assert!(fail(r#"{"message":{"chat_id":"c"}} trailing"#).starts_with("malformed JSON"));
}

#[test]
fn bytes_fail_as_text_does() {
    let m = format!(r#"{{"message":{{"chat_id":"c","mentions":"{MARKER}"}}}}"#);
    let from_bytes = from_json_bytes::<Doc>(m.as_bytes()).expect_err("must fail");
    assert_eq!(
        from_bytes,
        from_json::<Doc>(&m).expect_err("must fail"),
        "the same failure from bytes and from text"
    );
    assert!(!from_bytes.to_string().contains(MARKER), "{from_bytes}");
    let good = from_json_bytes::<Doc>(br#"{"message":{"chat_id":"c"}}"#).expect("decodes");
    assert_eq!(good.message.chat_id, "c");
    let text = from_json_bytes::<Doc>(b"{\"message\":{\"chat_id\":\"\xff\"}}")
        .expect_err("not UTF-8")
        .to_string();
    assert!(text.starts_with("malformed JSON"), "{text}");
}

#[test]
fn map_keys_in_paths_are_bounded() {
    let key = format!("{MARKER}{}", "k".repeat(500));
    let json = format!(r#"{{"message":{{"chat_id":"c"}},"labels":{{"{key}":"x"}}}}"#);
    let err = from_json::<Doc>(&json).expect_err("must fail").to_string();
    assert!(err.chars().count() < 160, "{err}");
    assert!(err.contains('…') && !err.contains(&"k".repeat(40)), "{err}");
}

#[test]
fn free_form_messages_say_only_invalid_data() {
    #[derive(Debug, Deserialize)]
    #[allow(dead_code)]
    struct Stamped {
        #[serde(deserialize_with = "refuse_quoting")]
        at: String,
    }
    fn refuse_quoting<'de, D: serde::Deserializer<'de>>(d: D) -> Result<String, D::Error> {
        let text = String::deserialize(d)?;
        Err(serde::de::Error::custom(format!("cannot read {text}")))
    }
    let json = format!(r#"{{"at":"{MARKER}"}}"#);
    let err = from_json::<Stamped>(&json)
        .expect_err("must fail")
        .to_string();
    assert_eq!(err, "invalid data at at");
}

#[test]
fn variants_and_numbers_are_told_through_enums_and_floats() {
    #[derive(Debug, Deserialize)]
    #[allow(dead_code)]
    enum Shape {
        Square { side: u8 },
        Named(String),
    }
    #[derive(Debug, Deserialize)]
    #[allow(dead_code)]
    struct Drawing {
        shape: Shape,
        #[serde(default)]
        count: i64,
    }
    let d = |json: &str| {
        from_json::<Drawing>(json)
            .expect_err("must fail")
            .to_string()
    };
    assert_eq!(
        d(&format!(
            r#"{{"shape":{{"Square":{{"side":"{MARKER}"}}}}}}"#
        )),
        "wrong type at shape.Square.side: expected u8, found a string"
    );
    assert_eq!(
        d(r#"{"shape":{"Named":"n"},"count":1.5}"#),
        "wrong type at count: expected i64, found a floating point number"
    );
    assert_eq!(
        d(&format!(r#"{{"shape":"{MARKER}"}}"#)),
        "unknown variant at shape: expected `Square` or `Named`"
    );
}

/// When the second reading fails elsewhere than the first (a type that reads only from
/// serde_json itself, here a raw value), only the first reading's path is told.
#[test]
fn a_replay_that_disagrees_leaves_only_the_path() {
    #[derive(Debug, Deserialize)]
    #[allow(dead_code)]
    struct Raw {
        raw: Box<serde_json::value::RawValue>,
        small: u8,
    }
    let json = format!(r#"{{"raw":{{"k":"{MARKER}"}},"small":300}}"#);
    let err = from_json::<Raw>(&json).expect_err("must fail").to_string();
    assert_eq!(err, "invalid data at small");
}

#[test]
fn query_strings_name_the_parameter_and_what_it_should_be() {
    #[derive(Debug, Deserialize)]
    #[allow(dead_code)]
    struct Query {
        key: String,
        #[serde(default)]
        verbose: bool,
        limit: Option<u32>,
        mode: Option<Mode>,
    }
    let q = |query: &str| {
        let err = from_query::<Query>(query)
            .expect_err("must fail")
            .to_string();
        assert!(!err.contains(MARKER), "{err}");
        err
    };
    assert_eq!(
        q(&format!("key=k&verbose={MARKER}")),
        "invalid value at verbose: expected true or false, found another string"
    );
    assert_eq!(
        q(&format!("key=k&limit={MARKER}")),
        "invalid value at limit: expected an integer, found another string"
    );
    assert_eq!(
        q("key=k&limit=99999999999"),
        "invalid value at limit: expected an integer in range, found an integer out of range"
    );
    assert_eq!(
        q(&format!("key=k&mode={MARKER}")),
        "unknown variant at mode: expected `shared` or `owner_only`"
    );
    assert_eq!(q("verbose=true"), "missing field key at the top level");
    assert_eq!(q("key=a&key=b"), "duplicate field key at the top level");
    let good =
        from_query::<Query>("key=k%20k&verbose=true&limit=7&mode=owner_only").expect("decodes");
    assert_eq!(
        (good.key.as_str(), good.verbose, good.limit),
        ("k k", true, Some(7))
    );
    assert!(matches!(good.mode, Some(Mode::OwnerOnly)));
}
