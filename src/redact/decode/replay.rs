//! Why a document failed to decode, from serde's own account of it.
//!
//! serde_json and serde_urlencoded keep a failure only as a message, and a message
//! quotes the value. The parts were at hand when the error was made, though: serde's
//! derives and visitors build every error through the constructors of `de::Error`
//! (`invalid_type(found, expected)`, `missing_field(name)`, …), and [`Refusal`] is an
//! error type that keeps those arguments, minus any value, instead of a message. Since
//! a deserializer fixes its own error type, the failed document is decoded once more,
//! from a [`Tree`] of it (members in order, a repeated key kept) through a deserializer
//! that behaves as serde_json (or serde_urlencoded, for a query string) does but fails
//! with a [`Refusal`]. The replay's account is taken only when it failed at the path
//! where the real reading did; otherwise the failure is "invalid data" at that path.

use std::fmt;

use serde::{
    Deserialize, Deserializer,
    de::{
        self, IntoDeserializer, MapAccess, SeqAccess, Unexpected, Visitor,
        value::{BorrowedStrDeserializer, MapAccessDeserializer, MapDeserializer, SeqDeserializer},
    },
    forward_to_deserialize_any,
};
use serde_path_to_error::Path;

use super::{Failure, Kind, located, refusal::Refusal, same_path};

/// Why decoding `tree` into `T` fails, told at `at`, the path of the real reading.
pub(super) fn why<T: de::DeserializeOwned>(tree: &Tree, at: &Path) -> Failure {
    match serde_path_to_error::deserialize::<_, T>(tree) {
        Err(e) if same_path(e.path(), at) => located(e.into_inner().0, at),
        _ => located(Kind::Invalid, at),
    }
}

/// A document's values, to decode again.
#[derive(Debug)]
pub(super) enum Tree {
    Null,
    Bool(bool),
    U64(u64),
    I64(i64),
    F64(f64),
    /// A JSON string.
    Str(String),
    /// A query string's value: a number or a boolean when the type asks for one.
    Text(String),
    Seq(Vec<Tree>),
    /// Members in the document's order; a repeated key stays, for serde to refuse.
    Map(Vec<(String, Tree)>),
}

impl Tree {
    /// A query string's pairs, percent-decoded, in order.
    pub(super) fn of_query(query: &str) -> Self {
        let pairs = url::form_urlencoded::parse(query.as_bytes());
        Self::Map(
            pairs
                .map(|(k, v)| (k.into_owned(), Self::Text(v.into_owned())))
                .collect(),
        )
    }

    fn unexpected(&self) -> Unexpected<'_> {
        match self {
            Self::Null => Unexpected::Unit,
            Self::Bool(b) => Unexpected::Bool(*b),
            Self::U64(n) => Unexpected::Unsigned(*n),
            Self::I64(n) => Unexpected::Signed(*n),
            Self::F64(n) => Unexpected::Float(*n),
            Self::Str(s) | Self::Text(s) => Unexpected::Str(s),
            Self::Seq(_) => Unexpected::Seq,
            Self::Map(_) => Unexpected::Map,
        }
    }
}

impl<'de> Deserialize<'de> for Tree {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(TreeVisitor)
    }
}

struct TreeVisitor;

impl<'de> Visitor<'de> for TreeVisitor {
    type Value = Tree;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E>(self, v: bool) -> Result<Tree, E> {
        Ok(Tree::Bool(v))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Tree, E> {
        Ok(Tree::I64(v))
    }

    fn visit_u64<E>(self, v: u64) -> Result<Tree, E> {
        Ok(Tree::U64(v))
    }

    fn visit_f64<E>(self, v: f64) -> Result<Tree, E> {
        Ok(Tree::F64(v))
    }

    fn visit_str<E>(self, v: &str) -> Result<Tree, E> {
        Ok(Tree::Str(v.to_owned()))
    }

    fn visit_string<E>(self, v: String) -> Result<Tree, E> {
        Ok(Tree::Str(v))
    }

    fn visit_unit<E>(self) -> Result<Tree, E> {
        Ok(Tree::Null)
    }

    fn visit_none<E>(self) -> Result<Tree, E> {
        Ok(Tree::Null)
    }

    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Tree, D::Error> {
        Tree::deserialize(d)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Tree, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element()? {
            items.push(item);
        }
        Ok(Tree::Seq(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Tree, A::Error> {
        let mut members = Vec::new();
        while let Some(member) = map.next_entry()? {
            members.push(member);
        }
        Ok(Tree::Map(members))
    }
}

/// A string read as text formats read their values: a map key in JSON, any value in a
/// query string. A number or a boolean is parsed from it when the type asks for one.
#[derive(Clone, Copy)]
struct Text<'de>(&'de str);

impl<'de> Text<'de> {
    fn integer<T: std::str::FromStr>(self) -> Result<T, Refusal> {
        self.0.parse().map_err(|_| {
            let (expected, found) = if self.0.parse::<i128>().is_ok() {
                ("an integer in range", "an integer out of range")
            } else {
                ("an integer", "another string")
            };
            Refusal(Kind::InvalidValue {
                expected: expected.into(),
                found: Some(found),
            })
        })
    }

    fn number<T: std::str::FromStr>(self) -> Result<T, Refusal> {
        self.0.parse().map_err(|_| {
            Refusal(Kind::InvalidValue {
                expected: "a number".into(),
                found: Some("another string"),
            })
        })
    }
}

/// `deserialize_<type>` methods that parse the text, then visit what they parsed.
macro_rules! parsed {
    ($($method:ident $visit:ident $how:ident,)*) => {$(
        fn $method<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Refusal> {
            visitor.$visit(self.$how()?)
        }
    )*};
}

impl<'de> Deserializer<'de> for Text<'de> {
    type Error = Refusal;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Refusal> {
        visitor.visit_borrowed_str(self.0)
    }

    fn deserialize_bool<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Refusal> {
        match self.0 {
            "true" => visitor.visit_bool(true),
            "false" => visitor.visit_bool(false),
            _ => Err(Refusal(Kind::InvalidValue {
                expected: "true or false".into(),
                found: Some("another string"),
            })),
        }
    }

    parsed! {
        deserialize_i8 visit_i8 integer,
        deserialize_i16 visit_i16 integer,
        deserialize_i32 visit_i32 integer,
        deserialize_i64 visit_i64 integer,
        deserialize_i128 visit_i128 integer,
        deserialize_u8 visit_u8 integer,
        deserialize_u16 visit_u16 integer,
        deserialize_u32 visit_u32 integer,
        deserialize_u64 visit_u64 integer,
        deserialize_u128 visit_u128 integer,
        deserialize_f32 visit_f32 number,
        deserialize_f64 visit_f64 number,
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Refusal> {
        visitor.visit_some(self)
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value, Refusal> {
        visitor.visit_newtype_struct(self)
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Refusal> {
        visitor.visit_enum(BorrowedStrDeserializer::new(self.0))
    }

    forward_to_deserialize_any! {
        char str string bytes byte_buf unit unit_struct seq tuple tuple_struct map struct
        identifier ignored_any
    }
}

impl<'de> IntoDeserializer<'de, Refusal> for Text<'de> {
    type Deserializer = Self;

    fn into_deserializer(self) -> Self {
        self
    }
}

impl<'de> IntoDeserializer<'de, Refusal> for &'de Tree {
    type Deserializer = Self;

    fn into_deserializer(self) -> Self {
        self
    }
}

/// A map's members for serde's `MapDeserializer`.
fn members(members: &[(String, Tree)]) -> impl Iterator<Item = (Text<'_>, &Tree)> {
    members.iter().map(|(k, v)| (Text(k), v))
}

/// `deserialize_<type>` methods: a query string's value is parsed as [`Text`] does,
/// every other value goes by its own kind, as serde_json's do.
macro_rules! by_kind {
    ($($method:ident)*) => {$(
        fn $method<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Refusal> {
            match self {
                Tree::Text(text) => Text(text).$method(visitor),
                _ => self.deserialize_any(visitor),
            }
        }
    )*};
}

impl<'de> Deserializer<'de> for &'de Tree {
    type Error = Refusal;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Refusal> {
        match self {
            Tree::Null => visitor.visit_unit(),
            Tree::Bool(b) => visitor.visit_bool(*b),
            Tree::U64(n) => visitor.visit_u64(*n),
            Tree::I64(n) => visitor.visit_i64(*n),
            Tree::F64(n) => visitor.visit_f64(*n),
            Tree::Str(s) | Tree::Text(s) => visitor.visit_borrowed_str(s),
            Tree::Seq(items) => {
                let mut seq = SeqDeserializer::<_, Refusal>::new(items.iter());
                let value = visitor.visit_seq(&mut seq)?;
                seq.end()?;
                Ok(value)
            }
            Tree::Map(entries) => {
                let mut map = MapDeserializer::<_, Refusal>::new(members(entries));
                let value = visitor.visit_map(&mut map)?;
                map.end()?;
                Ok(value)
            }
        }
    }

    by_kind! {
        deserialize_bool deserialize_i8 deserialize_i16 deserialize_i32 deserialize_i64
        deserialize_i128 deserialize_u8 deserialize_u16 deserialize_u32 deserialize_u64
        deserialize_u128 deserialize_f32 deserialize_f64
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Refusal> {
        match self {
            Tree::Null => visitor.visit_none(),
            _ => visitor.visit_some(self),
        }
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value, Refusal> {
        visitor.visit_newtype_struct(self)
    }

    /// A unit variant is a string; any other variant a map of one member, its name.
    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Refusal> {
        match self {
            Tree::Str(s) | Tree::Text(s) => visitor.visit_enum(BorrowedStrDeserializer::new(s)),
            Tree::Map(entries) if entries.len() == 1 => visitor.visit_enum(
                MapAccessDeserializer::new(MapDeserializer::new(members(entries))),
            ),
            _ => Err(de::Error::invalid_type(
                self.unexpected(),
                &"a string or a map of one member",
            )),
        }
    }

    fn deserialize_bytes<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Refusal> {
        match self {
            Tree::Str(s) | Tree::Text(s) => visitor.visit_borrowed_bytes(s.as_bytes()),
            _ => self.deserialize_any(visitor),
        }
    }

    fn deserialize_byte_buf<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Refusal> {
        self.deserialize_bytes(visitor)
    }

    fn deserialize_ignored_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Refusal> {
        visitor.visit_unit()
    }

    forward_to_deserialize_any! {
        char str string unit unit_struct seq tuple tuple_struct map struct identifier
    }
}
