//! The routing verdict of a message and its stable reason: what `GET
//! /explain/message/{id}` shows and what the routing table records.

crate::spelled! {
    /// The three verdicts.
    pub enum Verdict("verdict") {
        /// Nothing happens.
        Ignored = "ignored",
        /// Recorded as context; no turn.
        Observed = "observed",
        /// A turn (or a command) is due.
        Invoked = "invoked",
    }
}

crate::spelled! {
    /// Why a message got its verdict.
    pub enum Reason("verdict reason") {
        /// A private chat, and its sender may invoke.
        Dm = "dm",
        /// The bot was @-mentioned by someone who may invoke it.
        Mention = "mention",
        /// `group_reply_all` (or no `require_mention`): every message invokes.
        ReplyAll = "reply_all",
        /// A slash command.
        Command = "command",
        /// The profile does not take private chats.
        DmDisabled = "dm_disabled",
        /// The profile does not take group chats.
        GroupDisabled = "group_disabled",
        /// The chat is not in `allow_chats`.
        ChatNotAllowed = "chat_not_allowed",
        /// The bot's own open_id is unknown: group messages are not captured.
        BotIdentityUnknown = "bot_identity_unknown",
        /// This bot's own message.
        OwnMessage = "own_message",
        /// Sent by another bot or app.
        BotSender = "bot_sender",
        /// Not addressed to the bot.
        NoMention = "no_mention",
        /// The sender is not in `allow_users`.
        UserNotAllowed = "user_not_allowed",
        /// An `owner_only` workspace, and the sender is not its owner.
        NotOwner = "not_owner",
        /// An empty @ with no topic root to work on.
        EmptyRequest = "empty_request",
        /// The message was recalled before it was processed.
        Recalled = "recalled",
    }
}
