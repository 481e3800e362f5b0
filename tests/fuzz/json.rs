//! Arbitrary JSON values, biased toward the names and strings the Feishu formats use, so
//! random documents reach the branches a real callback takes.

use proptest::{collection::vec, prelude::*, sample::select};
use serde_json::{Map, Number, Value};

/// Member names and string values with a meaning somewhere in the bridge.
pub const WORDS: &[&str] = &[
    "schema",
    "2.0",
    "header",
    "event_id",
    "event_type",
    "token",
    "create_time",
    "uuid",
    "type",
    "url_verification",
    "event_callback",
    "challenge",
    "ts",
    "event",
    "message",
    "message_id",
    "chat_id",
    "encrypt",
    "text",
    "post",
    "content",
    "title",
    "tag",
    "at",
    "user_id",
    "user_name",
    "mentions",
    "key",
    "@_user_1",
    "@_all",
    "zh_cn",
    "code_block",
    "im.message.receive_v1",
    "im.message.recalled_v1",
    "card.action.trigger",
    "",
];

/// A short string: one of [`WORDS`], or anything.
pub fn word() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => select(WORDS).prop_map(str::to_string),
        1 => any::<String>(),
        1 => "[a-z_@ \\\\\"\u{0}\u{3000}]{0,12}",
    ]
}

/// A number JSON can carry: small and huge integers, negative ones, fractions.
fn number() -> impl Strategy<Value = Value> {
    prop_oneof![
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        any::<f64>().prop_map(|f| Number::from_f64(f).map_or(Value::Null, Value::Number)),
    ]
}

/// Any JSON value, up to a few levels deep.
pub fn value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        number(),
        word().prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 48, 6, |inner| {
        prop_oneof![
            vec(inner.clone(), 0..6).prop_map(Value::Array),
            vec((word(), inner), 0..6).prop_map(|members| Value::Object(object(members))),
        ]
    })
}

/// An object from members (a later duplicate name wins, as in `serde_json`).
pub fn object(members: Vec<(String, Value)>) -> Map<String, Value> {
    members.into_iter().collect()
}

/// A value for a member that is usually a string: absent is handled by the caller.
pub fn stringish() -> impl Strategy<Value = Value> {
    prop_oneof![
        4 => word().prop_map(Value::String),
        1 => Just(Value::Null),
        1 => number(),
        1 => any::<bool>().prop_map(Value::Bool),
        1 => Just(Value::Array(vec![])),
        1 => Just(Value::Object(Map::new())),
    ]
}
