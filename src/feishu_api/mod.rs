//! The Feishu Open API, as the bridge uses it: the tenant access token (cached, never
//! one request per message), the app's call budget, each bot's own identity, reads, and
//! the replies and cards leaving the bridge (`outbound`), each within Feishu's limits,
//! none of them able to notify anyone (`defuse`), each card with a chat-list summary;
//! the reactions that show a request is being worked on (`reactions`).

mod budget;
mod call;
mod card;
mod cardkit;
mod client;
pub mod codes;
pub mod defuse;
pub mod directory;
mod error;
pub mod fit;
pub mod identity;
pub mod media;
pub mod outbound;
mod raw;
pub mod reactions;
mod read;
pub mod reply;
pub mod summary;
mod token;

pub use budget::{ApiShare, Budget, Ledger, Urgency};
pub use client::FeishuClient;
pub use error::OpenApiError;
pub use raw::multipart_form;
pub use read::FetchedMessage;
pub use token::REFRESH_RETRY;
