//! What kind of chat a message is in, as stored and as Feishu names it.

crate::util::spelled::spelled! {
    /// What kind of chat a message is in.
    pub enum ChatType("chat type") {
        /// A private chat with the bot.
        P2p,
        /// A group chat (topic groups included).
        Group,
    }
}

impl ChatType {
    /// A message's `chat_type` as Feishu sends it: `p2p` is a private chat, and every
    /// other kind of chat Feishu names behaves as a group.
    pub fn of(chat_type: &str) -> Self {
        Self::parse(chat_type).unwrap_or(Self::Group)
    }
}

/// The chat's own feed key, `chat:<chat_id>`: where the batched feed gathers a chat's
/// un-mentioned talk when its history scope has no single session, for every session of
/// the chat to read.
pub fn chat_feed_key(chat_id: &str) -> String {
    format!("chat:{chat_id}")
}
