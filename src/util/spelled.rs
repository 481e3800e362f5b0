//! Enums spelled as fixed strings: in the database, in JSON, in metrics labels.
//!
//! [`spelled!`] defines one with its spellings once; it gets `as_str`, `parse`,
//! `Display`, `TryFrom<String>` (what a row decodes a column through) and serde by its
//! spelling. A spelling this version does not know is an [`UnknownValue`], never a
//! silent default.

/// A spelling read back that this version does not know.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown {kind}: {value:?}")]
pub struct UnknownValue {
    /// What was being read (`turn state`, `chat type`, …).
    pub kind: &'static str,
    /// The spelling found (a fixed code written by the bridge, never message text).
    pub value: String,
}

/// Defines an enum whose variants have fixed spellings:
///
/// ```ignore
/// spelled! {
///     /// Doc of the enum.
///     pub enum ChatType("chat type") {
///         /// A private chat.
///         P2p = "p2p",
///         /// A group chat.
///         Group = "group",
///     }
/// }
/// ```
#[macro_export]
macro_rules! spelled {
    (
        $(#[$meta:meta])*
        $vis:vis enum $name:ident ($kind:literal) {
            $( $(#[$vmeta:meta])* $variant:ident = $text:literal ),+ $(,)?
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

            /// Its spelling.
            pub fn as_str(self) -> &'static str {
                match self {
                    $(Self::$variant => $text),+
                }
            }

            /// The variant spelled `s`.
            pub fn parse(s: &str) -> Option<Self> {
                match s {
                    $($text => Some(Self::$variant),)+
                    _ => None,
                }
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
                    <D::Error as ::serde::de::Error>::unknown_variant(&s, &[$($text),+])
                })
            }
        }
    };
}

#[cfg(test)]
mod tests {
    crate::spelled! {
        /// A test enum.
        enum Colour("colour") {
            /// Red.
            Red = "red",
            /// Dark blue.
            DarkBlue = "dark_blue",
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
        assert_eq!(Colour::DarkBlue, "dark_blue");
        let err = Colour::try_from("green".to_string()).expect_err("unknown");
        assert_eq!(err.to_string(), "unknown colour: \"green\"");
        assert!(serde_json::from_str::<Colour>("\"green\"").is_err());
    }
}
