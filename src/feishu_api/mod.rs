//! The Feishu Open API, as the bridge uses it: the tenant access token (cached, never
//! one request per message), each bot's own identity, and the replies leaving the bridge
//! (`outbound`).

mod card;
mod client;
pub mod identity;
pub mod outbound;
pub mod reply;

pub use client::{FeishuClient, FetchedMessage, OpenApiError};
