//! Integration tests: a real bridge over real HTTP on 127.0.0.1, real SQLite files and
//! the real Postgres, with callbacks built by the real crypto.

mod errors;
mod inbox;
mod operating;
mod support;
mod vectors;
