//! The Feishu wire protocol: callback cryptography, envelopes, typed events.
//!
//! Pure functions over bytes and strings: no HTTP framework and no database here.

pub mod content;
pub mod crypto;
pub mod envelope;
pub mod events;
pub mod media;
pub mod strip;
pub mod verify;

pub use envelope::Schema;
pub use verify::{Credentials, Freshness, Rejection, SignedHeaders, Verified, VerifiedEvent};
