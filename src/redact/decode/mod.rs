//! Deserialization errors told by kind and path, never by value.
//!
//! serde's messages quote what they refused (`invalid type: string "…", expected …`,
//! `unknown variant `…``), and a stored Feishu payload is message text. A [`Failure`]
//! keeps only what serde derived from our own types (the expected shape, the names of
//! missing fields) and the kind of value found, plus the path to it with every segment
//! bounded (map keys can come from the input).
//!
//! None of it is read from a message. The path is `serde_path_to_error`'s, syntax errors
//! are told by `serde_json::Error::classify` and their position, and what a value was
//! refused for comes from serde's `de::Error` constructors themselves: the failed input
//! is decoded once more, through a deserializer whose error type keeps their arguments
//! (see `replay`). Anything they do not cover (a `custom` message) is "invalid data".

mod refusal;
mod replay;
#[cfg(test)]
mod tests;

use std::fmt::{self, Write as _};

use serde::de::DeserializeOwned;
use serde_json::error::Category;
use serde_path_to_error::{Path, Segment};

use self::replay::Tree;
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

/// Decodes JSON text into `T`; a failure is told by its path and kind. A good document
/// is read once, at full speed; only a failure is read again, to find where and why.
pub fn from_json<T: DeserializeOwned>(text: &str) -> Result<T, Failure> {
    from_json_bytes(text.as_bytes())
}

/// Decodes JSON bytes into `T`, as [`from_json`] does text (bytes that are not UTF-8
/// fail as malformed JSON, as serde_json has it).
pub fn from_json_bytes<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, Failure> {
    let first = match serde_json::from_slice(bytes) {
        Ok(value) => return Ok(value),
        Err(e) => e,
    };
    if first.classify() != Category::Data {
        return Err(unreadable(&first));
    }
    // Where: the same reading, tracking the path.
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let at = match serde_path_to_error::deserialize::<_, T>(&mut de) {
        Err(e) if e.inner().classify() == Category::Data => e.path().clone(),
        Err(e) => return Err(unreadable(e.inner())),
        // The same bytes cannot decode now: all that is known is that they did not.
        Ok(_) => return Err(located(Kind::Invalid, [])),
    };
    // Why: the document decoded again from a tree. Part of it may not even parse (the
    // value that failed came first): then that is the failure.
    match serde_json::from_slice::<Tree>(bytes) {
        Ok(tree) => Err(replay::why::<T>(&tree, &at)),
        Err(e) => Err(unreadable(&e)),
    }
}

/// Decodes a query string (`a=1&b=x`, percent-encoded) into `T`, as axum's `Query`
/// does (serde_urlencoded); a failure is told by its path and kind.
pub fn from_query<T: DeserializeOwned>(query: &str) -> Result<T, Failure> {
    let pairs = url::form_urlencoded::parse(query.as_bytes());
    serde_path_to_error::deserialize(serde_urlencoded::Deserializer::new(pairs))
        .map_err(|e| replay::why::<T>(&Tree::of_query(query), e.path()))
}

/// A JSON document that could not be read as JSON: where, by line and column.
fn unreadable(e: &serde_json::Error) -> Failure {
    let kind = match e.classify() {
        Category::Io => Kind::Unreadable,
        Category::Syntax | Category::Eof => Kind::Syntax {
            line: e.line(),
            column: e.column(),
        },
        Category::Data => Kind::Invalid,
    };
    located(kind, [])
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

/// The paths of two readings agree (compared whole, before any bounding).
fn same_path(a: &Path, b: &Path) -> bool {
    a.to_string() == b.to_string()
}
