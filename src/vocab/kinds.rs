//! The event log's vocabulary: what a record is, what an item is and who said it, and
//! why the selector left an item out. Spelled once (the database, decisions' JSON and
//! explain show the same words).

crate::util::spelled::spelled! {
    /// What an event-log record is.
    pub enum EventType("event type") {
        /// A thread's root message.
        TopicRoot,
        /// Human discussion in a thread.
        HumanMessage,
        /// The request of a turn (a fact, never an item).
        UserRequest,
        /// A bot's answer, visible to the other bots in the thread.
        AgentOutput,
        /// A slash command (a fact, never an item).
        Command,
    }
}

crate::util::spelled::spelled! {
    /// What a context item is: the records the selector may pick.
    pub enum ItemType("item type") {
        /// A thread's root message.
        TopicRoot,
        /// Human discussion.
        HumanMessage,
        /// A bot's answer.
        AgentOutput,
    }
}

crate::util::spelled::spelled! {
    /// What a media context item is: what a turn fetched of what its messages carry.
    pub enum MediaItemType("media item type") {
        /// An image (to the agent as image data or a signed URL).
        Image,
        /// A small text file, inlined.
        TextFile,
        /// Another file, listed by name and size (and a signed URL for webhook agents).
        File,
        /// A forwarded bundle, expanded into `sender: text` lines.
        Bundle,
        /// A Feishu doc's text.
        Doc,
    }
}

crate::util::spelled::spelled! {
    /// Who an item's author is.
    pub enum Role("role") {
        /// A person.
        Human,
        /// A bot or an app.
        Bot,
    }
}

crate::util::spelled::spelled! {
    /// Why the selector left an item out (or which budget cut).
    pub enum Exclusion("exclusion reason") {
        /// A command carries no context.
        Command,
        /// Recalled since it was recorded.
        Recalled,
        /// The request of this very turn.
        SameTurnRequest,
        /// This bot's own earlier answer.
        OwnOutput,
        /// Another profile's record of a message (each profile reads its own).
        OtherProfile,
        /// Discussion in an `owner_only` workspace.
        Mode,
        /// Over the item budget (`thread_context_limit`).
        Limit,
        /// Over the character budget (`max_context_chars`).
        Chars,
        /// Already in the thread context.
        InThreadContext,
        /// The topic root, which has its own block.
        TopicRootBlock,
        /// In a batched-feed segment the same turn is given (the feed carries it).
        InFeed,
    }
}

impl ItemType {
    /// The item a record of this type becomes, if any.
    pub fn of(event: EventType) -> Option<Self> {
        match event {
            EventType::TopicRoot => Some(Self::TopicRoot),
            EventType::HumanMessage => Some(Self::HumanMessage),
            EventType::AgentOutput => Some(Self::AgentOutput),
            EventType::UserRequest | EventType::Command => None,
        }
    }
}
