//! Byte-level mutations of seed inputs: bit flips, cuts, insertions of the bytes that
//! matter to JSON and protobuf, deletions and repeats. Positions are taken modulo the
//! input's length, so one strategy serves inputs of every size.

use proptest::{collection::vec, prelude::*, sample::select};

/// One change to a byte string.
#[derive(Debug, Clone)]
pub enum Mutation {
    /// Flips bit `bit` of one byte.
    FlipBit { at: usize, bit: u8 },
    /// Keeps a strict prefix.
    Truncate { keep: usize },
    /// Removes up to `len` bytes.
    Delete { at: usize, len: usize },
    /// Inserts `bytes`.
    Insert { at: usize, bytes: Vec<u8> },
    /// Replaces one byte.
    Overwrite { at: usize, byte: u8 },
    /// Repeats up to `len` bytes in place.
    Repeat { at: usize, len: usize },
}

/// Bytes with a meaning in JSON, base64 or protobuf, and a few that break UTF-8.
const INTERESTING: &[u8] = b"{}[]\":,\\0123456789-.eEtnu =+/\x00\x01\x7f\x80\xc3\xff\x08\x10\x2a";

/// A byte, often one of [`INTERESTING`].
pub fn byte() -> impl Strategy<Value = u8> {
    prop_oneof![select(INTERESTING), any::<u8>()]
}

/// Any one mutation.
pub fn mutation() -> impl Strategy<Value = Mutation> {
    let at = any::<usize>();
    prop_oneof![
        3 => (at, 0..8u8).prop_map(|(at, bit)| Mutation::FlipBit { at, bit }),
        1 => any::<usize>().prop_map(|keep| Mutation::Truncate { keep }),
        1 => (at, 1..8usize).prop_map(|(at, len)| Mutation::Delete { at, len }),
        2 => (at, vec(byte(), 1..4)).prop_map(|(at, bytes)| Mutation::Insert { at, bytes }),
        2 => (at, byte()).prop_map(|(at, byte)| Mutation::Overwrite { at, byte }),
        1 => (at, 1..16usize).prop_map(|(at, len)| Mutation::Repeat { at, len }),
    ]
}

/// One to four mutations, applied in order.
pub fn mutations() -> impl Strategy<Value = Vec<Mutation>> {
    vec(mutation(), 1..4)
}

/// A change that always alters a non-empty input: a bit flip or a strict cut.
pub fn flip_or_cut() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        3 => (any::<usize>(), 0..8u8).prop_map(|(at, bit)| Mutation::FlipBit { at, bit }),
        1 => any::<usize>().prop_map(|keep| Mutation::Truncate { keep }),
    ]
}

impl Mutation {
    /// Applies this change to `bytes` (an empty input only grows by insertion).
    pub fn apply(&self, bytes: &mut Vec<u8>) {
        let n = bytes.len();
        match *self {
            Self::Insert { at, bytes: ref new } => {
                let at = at % (n + 1);
                bytes.splice(at..at, new.iter().copied());
            }
            _ if n == 0 => {}
            Self::FlipBit { at, bit } => bytes[at % n] ^= 1 << bit,
            Self::Truncate { keep } => bytes.truncate(keep % n),
            Self::Delete { at, len } => {
                let at = at % n;
                bytes.drain(at..(at + len).min(n));
            }
            Self::Overwrite { at, byte } => bytes[at % n] = byte,
            Self::Repeat { at, len } => {
                let at = at % n;
                let piece = bytes[at..(at + len).min(n)].to_vec();
                bytes.splice(at..at, piece);
            }
        }
    }
}

/// `bytes` after every mutation of `changes`.
pub fn mutated(bytes: &[u8], changes: &[Mutation]) -> Vec<u8> {
    let mut out = bytes.to_vec();
    for change in changes {
        change.apply(&mut out);
    }
    out
}

/// `text` after `changes`, as text (invalid UTF-8 replaced, which keeps it changed).
pub fn mutated_text(text: &str, changes: &[Mutation]) -> String {
    String::from_utf8_lossy(&mutated(text.as_bytes(), changes)).into_owned()
}
