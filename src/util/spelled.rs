//! Enums spelled as fixed strings: in the database, in JSON, in metrics labels.
//!
//! [`spelled!`] defines one; each variant is spelled as its name in snake_case
//! (`SameTurnRequest` is `same_turn_request`), computed at compile time, so a spelling is
//! written nowhere but in the variant's name. It gets `as_str`, `parse`, `Display`,
//! `TryFrom<String>` (what a row decodes a column through) and serde by its spelling. A
//! spelling this version does not know is an [`UnknownValue`], never a silent default.
//! Renaming a variant renames what is stored: the integration tests pin every
//! vocabulary's spellings.

/// A spelling read back that this version does not know.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown {kind}: {value:?}")]
pub struct UnknownValue {
    /// What was being read (`turn state`, `chat type`, …).
    pub kind: &'static str,
    /// The spelling found (a fixed code written by the bridge, never message text).
    pub value: String,
}

/// How many bytes the snake_case spelling of the ASCII name `name` takes.
#[doc(hidden)]
pub const fn snake_len(name: &str) -> usize {
    let bytes = name.as_bytes();
    let mut len = bytes.len();
    let mut i = 1;
    while i < bytes.len() {
        if bytes[i].is_ascii_uppercase() {
            len += 1;
        }
        i += 1;
    }
    len
}

/// The snake_case spelling of the ASCII name `name`, `N` ([`snake_len`]) bytes long.
#[doc(hidden)]
pub const fn snake<const N: usize>(name: &str) -> [u8; N] {
    let bytes = name.as_bytes();
    let mut out = [0u8; N];
    let (mut i, mut o) = (0, 0);
    while i < bytes.len() {
        let b = bytes[i];
        if b.is_ascii_uppercase() && i > 0 {
            out[o] = b'_';
            o += 1;
        }
        out[o] = b.to_ascii_lowercase();
        o += 1;
        i += 1;
    }
    out
}

/// The spelling of the variant named `$variant`, as a `&'static str` constant.
macro_rules! spelling {
    ($variant:ident) => {{
        const NAME: &str = stringify!($variant);
        const BYTES: [u8; $crate::util::spelled::snake_len(NAME)] =
            $crate::util::spelled::snake(NAME);
        const TEXT: &str = match ::core::str::from_utf8(&BYTES) {
            Ok(text) => text,
            Err(_) => panic!("variant names are ASCII"),
        };
        TEXT
    }};
}
pub(crate) use spelling;

/// Defines an enum whose variants are spelled as their names in snake_case:
///
/// ```ignore
/// spelled! {
///     /// Doc of the enum.
///     pub enum ChatType("chat type") {
///         /// A private chat: `p2p`.
///         P2p,
///         /// A group chat: `group`.
///         Group,
///     }
/// }
/// ```
macro_rules! spelled {
    (
        $(#[$meta:meta])*
        $vis:vis enum $name:ident ($kind:literal) {
            $( $(#[$vmeta:meta])* $variant:ident ),+ $(,)?
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        $vis enum $name {
            $( $(#[$vmeta])* $variant ),+
        }

        impl $name {
            /// Every variant, in declaration order.
            pub const ALL: &'static [Self] = &[$(Self::$variant),+];

            /// Every spelling, in declaration order.
            pub const SPELLINGS: &'static [&'static str] = &[$($crate::util::spelled::spelling!($variant)),+];

            /// Its spelling.
            pub fn as_str(self) -> &'static str {
                match self {
                    $(Self::$variant => $crate::util::spelled::spelling!($variant)),+
                }
            }

            /// The variant spelled `s`.
            pub fn parse(s: &str) -> Option<Self> {
                Self::ALL.iter().copied().find(|v| v.as_str() == s)
            }
        }

        impl ::std::fmt::Display for $name {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl ::std::cmp::PartialEq<&str> for $name {
            fn eq(&self, other: &&str) -> bool {
                self.as_str() == *other
            }
        }

        impl ::std::convert::TryFrom<String> for $name {
            type Error = $crate::util::spelled::UnknownValue;
            fn try_from(value: String) -> Result<Self, Self::Error> {
                Self::parse(&value).ok_or($crate::util::spelled::UnknownValue {
                    kind: $kind,
                    value,
                })
            }
        }

        impl ::serde::Serialize for $name {
            fn serialize<S: ::serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(self.as_str())
            }
        }

        impl<'de> ::serde::Deserialize<'de> for $name {
            fn deserialize<D: ::serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let s = <::std::borrow::Cow<'de, str> as ::serde::Deserialize>::deserialize(d)?;
                Self::parse(&s).ok_or_else(|| {
                    <D::Error as ::serde::de::Error>::unknown_variant(&s, Self::SPELLINGS)
                })
            }
        }
    };
}
pub(crate) use spelled;

#[cfg(test)]
mod tests {
    crate::util::spelled::spelled! {
        /// A test enum.
        enum Colour("colour") {
            /// Red.
            Red,
            /// Dark blue.
            DarkBlue,
        }
    }

    #[test]
    fn spellings_round_trip_and_unknown_ones_are_errors() {
        for c in Colour::ALL {
            assert_eq!(Colour::parse(c.as_str()), Some(*c));
            assert_eq!(Colour::try_from(c.to_string()), Ok(*c));
            let json = serde_json::to_string(c).expect("serialises");
            assert_eq!(serde_json::from_str::<Colour>(&json).expect("parses"), *c);
        }
        assert_eq!(Colour::DarkBlue.as_str(), "dark_blue");
        assert_eq!(Colour::SPELLINGS, ["red", "dark_blue"]);
        assert_eq!(Colour::DarkBlue, "dark_blue");
        let err = Colour::try_from("green".to_string()).expect_err("unknown");
        assert_eq!(err.to_string(), "unknown colour: \"green\"");
        assert!(serde_json::from_str::<Colour>("\"green\"").is_err());
    }
}
