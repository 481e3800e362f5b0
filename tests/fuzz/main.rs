//! Property-based fuzzing of everything that reads bytes from outside: the callback
//! cryptography and verification, the envelope parser, content normalization, and the
//! long-connection frame decoder with its fragment reassembly.
//!
//! Each property first replays its seed corpus (`tests/fuzz/corpus/<target>.json`, the
//! shared Feishu vectors and the SDK frames), then the failing seeds persisted in
//! `tests/fuzz/regressions/<target>.txt`, then `FEISHU_BRIDGE_FUZZ_CASES` random cases
//! (256 by default, so `cargo test` stays quick). A long run:
//! `FEISHU_BRIDGE_FUZZ_CASES=200000 cargo test --release --test fuzz`.

mod content;
mod crypto;
mod envelope;
mod envelope_model;
mod fragments;
mod frame;
mod json;
mod mutate;
mod support;
mod verify;
