//! feishu-bridge: the Feishu (Lark) event URL for AI-agent bots.
//!
//! Data flow (the module tree follows it): [`protocol`] verifies and decrypts a callback,
//! [`http`] answers Feishu once the [`inbox`] has stored it durably in the [`store`], and
//! the inbox worker drives the processing pipeline. [`config`], [`telemetry`] and [`app`]
//! hold it together.

pub mod app;
pub mod cli;
pub mod config;
pub mod http;
pub mod inbox;
pub mod ops;
pub mod protocol;
pub mod store;
pub mod telemetry;
pub mod util;

pub use app::{App, AppState, Bridge};
pub use config::Config;
