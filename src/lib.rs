//! feishu-bridge: the Feishu (Lark) event URL for AI-agent bots.
//!
//! Data flow (the module tree follows it): [`protocol`] verifies and decrypts a callback,
//! [`http`] answers Feishu once the [`inbox`] has stored it durably in the [`store`]; the
//! inbox worker normalizes each message ([`protocol::content`]), routes it ([`routing`]),
//! records its facts ([`context`]), runs [`commands`] and queues turns per session
//! ([`session_queue`]); replies leave through [`outbound`]. [`config`], [`identity`],
//! [`feishu_api`], [`telemetry`] and [`app`] hold it together; [`server`] accepts the
//! connections and bounds them; [`redact`] keeps client and message text out of errors
//! and logs.

pub mod agent;
pub mod app;
pub mod card_actions;
pub mod cli;
pub mod commands;
pub mod config;
pub mod context;
pub mod explain;
pub mod feishu_api;
pub mod http;
pub mod identity;
pub mod inbox;
pub mod ops;
pub mod outbound;
pub mod protocol;
pub mod redact;
pub mod routing;
pub mod server;
pub mod session_queue;
pub mod simulate;
pub mod store;
pub mod telemetry;
pub mod turns;
pub mod util;

pub use app::{App, AppState, Bridge};
pub use config::Config;
