//! Deserialization errors told by kind and path, never by value.
//!
//! serde's messages quote what they refused (`invalid type: string "…", expected …`,
//! `unknown variant `…``), and a stored Feishu payload is message text. A [`Failure`]
//! keeps only what serde derived from our own types (the expected shape, the names of
//! missing fields) and the kind of value found, plus the path to it with every segment
//! bounded (map keys can come from the input).

use std::fmt::{self, Write as _};

use serde::de::DeserializeOwned;
use serde_json::error::Category;
use serde_path_to_error::{Path, Segment};

use super::bounded;

/// The most characters of one path segment (a map key can be anything).
const SEGMENT_MAX: usize = 32;
/// The most characters of a whole path.
const PATH_MAX: usize = 160;
/// The most characters of an `expected …` description.
const EXPECTED_MAX: usize = 80;

/// Why a value could not be decoded, without the value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    kind: Kind,
    path: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Kind {
    WrongType {
        expected: String,
        found: &'static str,
    },
    InvalidValue {
        expected: String,
        found: Option<&'static str>,
    },
    WrongLength {
        expected: String,
    },
    UnknownVariant {
        expected: Option<String>,
    },
    UnknownField,
    MissingField(Option<String>),
    DuplicateField(Option<String>),
    Syntax {
        line: usize,
        column: usize,
    },
    Unreadable,
    Invalid,
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let path = &self.path;
        match &self.kind {
            Kind::WrongType { expected, found } => {
                write!(
                    f,
                    "wrong type at {path}: expected {expected}, found {found}"
                )
            }
            Kind::InvalidValue { expected, found } => {
                write!(f, "invalid value at {path}: expected {expected}")?;
                match found {
                    Some(found) => write!(f, ", found {found}"),
                    None => Ok(()),
                }
            }
            Kind::WrongLength { expected } => {
                write!(f, "wrong length at {path}: expected {expected}")
            }
            Kind::UnknownVariant { expected: Some(e) } => {
                write!(f, "unknown variant at {path}: expected {e}")
            }
            Kind::UnknownVariant { expected: None } => write!(f, "unknown variant at {path}"),
            Kind::UnknownField => write!(f, "unknown field at {path}"),
            Kind::MissingField(Some(name)) => write!(f, "missing field {name} at {path}"),
            Kind::MissingField(None) => write!(f, "missing field at {path}"),
            Kind::DuplicateField(Some(name)) => write!(f, "duplicate field {name} at {path}"),
            Kind::DuplicateField(None) => write!(f, "duplicate field at {path}"),
            Kind::Syntax { line, column } => {
                write!(f, "malformed JSON at line {line} column {column}")
            }
            Kind::Unreadable => f.write_str("input could not be read"),
            Kind::Invalid => write!(f, "invalid data at {path}"),
        }
    }
}

impl std::error::Error for Failure {}

/// Decodes JSON text into `T`; a failure is told by its path and kind. The path is
/// tracked only on a second pass after a failure, so a good document is read once, at
/// full speed.
pub fn from_json<T: DeserializeOwned>(text: &str) -> Result<T, Failure> {
    from_json_bytes(text.as_bytes())
}

/// Decodes JSON bytes into `T`, as [`from_json`] does text (bytes that are not UTF-8
/// fail as malformed JSON, as serde_json has it).
pub fn from_json_bytes<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, Failure> {
    if let Ok(value) = serde_json::from_slice(bytes) {
        return Ok(value);
    }
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let value = serde_path_to_error::deserialize(&mut de).map_err(|e| of_json(&e))?;
    de.end().map_err(|e| Failure {
        kind: syntax(&e),
        path: render_path([]),
    })?;
    Ok(value)
}

/// A serde_json failure, by kind and path.
pub fn of_json(e: &serde_path_to_error::Error<serde_json::Error>) -> Failure {
    let inner = e.inner();
    let kind = match inner.classify() {
        Category::Syntax | Category::Eof => syntax(inner),
        Category::Io => Kind::Unreadable,
        Category::Data => classify(&json_message(inner)),
    };
    located(kind, e.path())
}

/// Any deserializer's failure, from its message and the path it happened at.
pub fn of_message(path: &Path, message: &str) -> Failure {
    failure(path, message)
}

fn failure<'a>(path: impl IntoIterator<Item = &'a Segment>, message: &str) -> Failure {
    located(classify(message), path)
}

/// The failure at `path`. An unknown field's path ends in the field's own name, which
/// is input, so that segment is left out.
fn located<'a>(kind: Kind, path: impl IntoIterator<Item = &'a Segment>) -> Failure {
    let mut segments: Vec<&Segment> = path.into_iter().collect();
    if kind == Kind::UnknownField && matches!(segments.last(), Some(Segment::Map { .. })) {
        segments.pop();
    }
    Failure {
        kind,
        path: render_path(segments),
    }
}

fn syntax(e: &serde_json::Error) -> Kind {
    Kind::Syntax {
        line: e.line(),
        column: e.column(),
    }
}

/// serde_json's message without the position it appends.
fn json_message(e: &serde_json::Error) -> String {
    let full = e.to_string();
    if e.line() == 0 {
        return full;
    }
    let suffix = format!(" at line {} column {}", e.line(), e.column());
    match full.strip_suffix(&suffix) {
        Some(message) => message.to_string(),
        None => full,
    }
}

/// Sorts serde's message classes (`serde::de::Error`'s provided constructors) and a few
/// fixed messages of `FromStr` errors; anything else is reported as invalid data.
fn classify(message: &str) -> Kind {
    let expected = |e: &str| bounded(e, EXPECTED_MAX);
    if let Some(rest) = message.strip_prefix("invalid type: ") {
        // The value comes first and the expectation last: split at the last marker.
        return match rest.rsplit_once(", expected ") {
            Some((unexp, exp)) => Kind::WrongType {
                expected: expected(exp),
                found: found(unexp),
            },
            None => Kind::Invalid,
        };
    }
    if let Some(rest) = message.strip_prefix("invalid value: ") {
        return match rest.rsplit_once(", expected ") {
            Some((unexp, exp)) => Kind::InvalidValue {
                expected: expected(exp),
                found: Some(found(unexp)),
            },
            None => Kind::Invalid,
        };
    }
    if let Some(rest) = message.strip_prefix("invalid length ") {
        return match rest.split_once(", expected ") {
            Some((_, exp)) => Kind::WrongLength {
                expected: expected(exp),
            },
            None => Kind::Invalid,
        };
    }
    if message.starts_with("unknown variant ") {
        return Kind::UnknownVariant {
            expected: message
                .rsplit_once("`, expected ")
                .map(|(_, e)| expected(e)),
        };
    }
    if message.starts_with("unknown field ") {
        return Kind::UnknownField;
    }
    if let Some(rest) = message.strip_prefix("missing field ") {
        return Kind::MissingField(field_name(rest));
    }
    if let Some(rest) = message.strip_prefix("duplicate field ") {
        return Kind::DuplicateField(field_name(rest));
    }
    let (exp, found) = match message {
        "provided string was not `true` or `false`" => ("true or false", "another string"),
        "invalid digit found in string" | "cannot parse integer from empty string" => {
            ("an integer", "another string")
        }
        "number too large to fit in target type" | "number too small to fit in target type" => {
            ("an integer in range", "an integer out of range")
        }
        "invalid float literal" => ("a number", "another string"),
        _ => return Kind::Invalid,
    };
    Kind::InvalidValue {
        expected: exp.into(),
        found: Some(found),
    }
}

/// The kind of an `Unexpected` as serde (and serde_json) print it, without its value.
fn found(unexpected: &str) -> &'static str {
    const KINDS: &[(&str, &str)] = &[
        ("string ", "a string"),
        ("integer ", "an integer"),
        ("floating point ", "a floating point number"),
        ("boolean ", "a boolean"),
        ("character ", "a character"),
        ("null", "null"),
        ("map", "a map"),
        ("sequence", "a sequence"),
        ("byte array", "bytes"),
        ("unit value", "a unit value"),
        ("Option value", "an optional value"),
        ("newtype struct", "a newtype struct"),
        ("enum", "an enum"),
        ("unit variant", "a unit variant"),
        ("newtype variant", "a newtype variant"),
        ("tuple variant", "a tuple variant"),
        ("struct variant", "a struct variant"),
    ];
    KINDS
        .iter()
        .find(|(prefix, _)| unexpected == prefix.trim_end() || unexpected.starts_with(prefix))
        .map_or("another kind of value", |(_, kind)| kind)
}

/// A field name between backticks, kept only when it looks like one of ours.
fn field_name(quoted: &str) -> Option<String> {
    let name = quoted.strip_prefix('`')?.strip_suffix('`')?;
    let plain = !name.is_empty()
        && name.len() <= SEGMENT_MAX
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    plain.then(|| name.to_string())
}

/// `event.message.mentions[0].name`; each segment and the whole bounded.
fn render_path<'a>(path: impl IntoIterator<Item = &'a Segment>) -> String {
    let mut out = String::new();
    for segment in path {
        let name = match segment {
            Segment::Seq { index } => {
                // Writing to a String cannot fail.
                let _ = write!(out, "[{index}]");
                continue;
            }
            Segment::Map { key } => bounded(key, SEGMENT_MAX),
            Segment::Enum { variant } => bounded(variant, SEGMENT_MAX),
            Segment::Unknown => "?".to_string(),
        };
        if !out.is_empty() {
            out.push('.');
        }
        out.push_str(&name);
    }
    if out.is_empty() {
        return "the top level".to_string();
    }
    bounded(&out, PATH_MAX)
}

#[cfg(test)]
mod tests {
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
        let m = format!(
            r#"{{"message":{{"chat_id":"c","mentions":[{{"name":{{"k":"{MARKER}"}}}}]}}}}"#
        );
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
    fn unrecognised_messages_say_only_invalid_data() {
        let f = failure([], &format!("custom failure about {MARKER}"));
        assert_eq!(f.to_string(), "invalid data at the top level");
        let key = Segment::Map {
            key: "verbose".into(),
        };
        let f = failure([&key], "provided string was not `true` or `false`");
        assert_eq!(
            f.to_string(),
            "invalid value at verbose: expected true or false, found another string"
        );
    }
}
