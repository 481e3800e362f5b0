//! The routing verdict of a message and its stable reason: what `GET
//! /explain/message/{id}` shows and what the routing table records.

crate::util::spelled::spelled! {
    /// The three verdicts.
    pub enum Verdict("verdict") {
        /// Nothing happens.
        Ignored,
        /// Recorded as context; no turn.
        Observed,
        /// A turn (or a command) is due.
        Invoked,
    }
}

crate::util::spelled::spelled! {
    /// Why a message got its verdict.
    pub enum Reason("verdict reason") {
        /// A private chat, and its sender may invoke.
        Dm,
        /// The bot was @-mentioned by someone who may invoke it.
        Mention,
        /// `group_reply_all` (or no `require_mention`): every message invokes.
        ReplyAll,
        /// A slash command.
        Command,
        /// The profile does not take private chats.
        DmDisabled,
        /// The profile does not take group chats.
        GroupDisabled,
        /// The chat is not in `allow_chats`.
        ChatNotAllowed,
        /// The bot's own open_id is unknown: group messages are not captured.
        BotIdentityUnknown,
        /// This bot's own message.
        OwnMessage,
        /// Sent by another bot or app.
        BotSender,
        /// Not addressed to the bot.
        NoMention,
        /// The sender is not in `allow_users`.
        UserNotAllowed,
        /// An `owner_only` workspace, and the sender is not its owner.
        NotOwner,
        /// An empty @ with no topic root to work on.
        EmptyRequest,
        /// The message was recalled before it was processed.
        Recalled,
        /// Another profile's answer handed work to this one (a handoff turn).
        Handoff,
        /// A handoff to this profile that the loop guard cut (hops, ping-pong, budget).
        HandoffCut,
    }
}
