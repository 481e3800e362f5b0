//! feishu-bridge: the Feishu (Lark) event URL for AI-agent bots.
//!
//! Data flow (the module tree follows it): [`server`] accepts connections, [`protocol`]
//! verifies and decrypts a callback, [`http`] answers Feishu once the [`inbox`] has stored
//! it durably in the [`store`]; the inbox worker normalizes each message, routes it
//! ([`routing`]), records its facts ([`context`]), gathers un-mentioned group messages
//! into its batched [`feed`], runs its commands, and queues turns per session
//! ([`turns`]), which hand prompts to [`agent`]s and post answers through
//! [`feishu_api`]. [`longconn`] is Feishu's long connection, the WebSocket alternative
//! to the event URL. Once a day the [`digest`] summarizes each session and starts it
//! afresh. [`names`] looks up who said it and where; [`media`] fetches what messages
//! carry (images, files, bundles, docs) for a turn and reads what agents send back. [`app`] assembles and serves it all; [`config`],
//! [`telemetry`] and [`redact`] sit beneath; [`ops`] holds the one-shot commands of the
//! CLI.

pub mod agent;
pub mod app;
pub mod cli;
pub mod config;
pub mod context;
pub mod digest;
pub mod explain;
pub mod feed;
pub mod feishu_api;
pub mod http;
pub mod inbox;
pub mod longconn;
pub mod media;
pub mod names;
pub mod ops;
pub mod protocol;
pub mod redact;
pub mod routing;
pub mod server;
pub mod state;
pub mod store;
pub mod telemetry;
pub mod turns;
pub mod util;
pub mod vocab;

pub use app::Bridge;
pub use config::Config;
pub use state::{App, AppState};
