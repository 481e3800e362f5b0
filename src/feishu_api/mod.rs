//! The Feishu Open API, as the bridge uses it: the tenant access token (cached, never
//! one request per message) and the bot's own identity.

mod card;
mod client;
pub mod reply;

pub use client::{ApiError, FeishuClient, FetchedMessage};
