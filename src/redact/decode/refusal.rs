//! An error type that keeps what serde's `de::Error` constructors are told (the kind of
//! value found, what was expected, our own field names) and drops every value.

use std::fmt;

use serde::de::{self, Expected, Unexpected};

use super::{EXPECTED_MAX, Kind, SEGMENT_MAX};
use crate::redact::bounded;

/// Why a value was refused, as serde's `de::Error` constructors were told it.
#[derive(Debug)]
pub(super) struct Refusal(pub(super) Kind);

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "refused: {:?}", self.0)
    }
}

impl std::error::Error for Refusal {}

impl de::Error for Refusal {
    /// A free-form message may quote the value: only that the data was invalid.
    fn custom<T: fmt::Display>(_message: T) -> Self {
        Self(Kind::Invalid)
    }

    fn invalid_type(found: Unexpected<'_>, expected: &dyn Expected) -> Self {
        Self(Kind::WrongType {
            expected: expectation(expected),
            found: kind_of(&found),
        })
    }

    fn invalid_value(found: Unexpected<'_>, expected: &dyn Expected) -> Self {
        Self(Kind::InvalidValue {
            expected: expectation(expected),
            found: Some(kind_of(&found)),
        })
    }

    fn invalid_length(_len: usize, expected: &dyn Expected) -> Self {
        Self(Kind::WrongLength {
            expected: expectation(expected),
        })
    }

    fn unknown_variant(_variant: &str, expected: &'static [&'static str]) -> Self {
        Self(Kind::UnknownVariant {
            expected: one_of(expected),
        })
    }

    fn unknown_field(_field: &str, _expected: &'static [&'static str]) -> Self {
        Self(Kind::UnknownField)
    }

    fn missing_field(field: &'static str) -> Self {
        Self(Kind::MissingField(field_name(field)))
    }

    fn duplicate_field(field: &'static str) -> Self {
        Self(Kind::DuplicateField(field_name(field)))
    }
}

/// What a type expected, in its own words (ours or serde's), bounded.
fn expectation(expected: &dyn Expected) -> String {
    bounded(&expected.to_string(), EXPECTED_MAX)
}

/// The kind of value found, without the value.
fn kind_of(found: &Unexpected<'_>) -> &'static str {
    match found {
        Unexpected::Bool(_) => "a boolean",
        Unexpected::Unsigned(_) | Unexpected::Signed(_) => "an integer",
        Unexpected::Float(_) => "a floating point number",
        Unexpected::Char(_) => "a character",
        Unexpected::Str(_) => "a string",
        Unexpected::Bytes(_) => "bytes",
        // JSON's null is what a replay offers as a unit.
        Unexpected::Unit => "null",
        Unexpected::Option => "an optional value",
        Unexpected::NewtypeStruct => "a newtype struct",
        Unexpected::Seq => "a sequence",
        Unexpected::Map => "a map",
        Unexpected::Enum => "an enum",
        Unexpected::UnitVariant => "a unit variant",
        Unexpected::NewtypeVariant => "a newtype variant",
        Unexpected::TupleVariant => "a tuple variant",
        Unexpected::StructVariant => "a struct variant",
        Unexpected::Other(_) => "another kind of value",
    }
}

/// An enum's variants as serde lists them: `` `a` ``, `` `a` or `b` ``, `` one of `a`, `b`, `c` ``.
fn one_of(names: &[&str]) -> Option<String> {
    let quoted: Vec<String> = names.iter().map(|n| format!("`{n}`")).collect();
    let text = match quoted.as_slice() {
        [] => return None,
        [one] => one.clone(),
        [a, b] => format!("{a} or {b}"),
        more => format!("one of {}", more.join(", ")),
    };
    Some(bounded(&text, EXPECTED_MAX))
}

/// A field name from our types, kept only when it looks like one.
fn field_name(name: &str) -> Option<String> {
    let plain = !name.is_empty()
        && name.len() <= SEGMENT_MAX
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    plain.then(|| name.to_string())
}
