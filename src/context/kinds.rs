//! The event log's vocabulary: what a record is, what an item is and who said it, and
//! why the selector left an item out. Spelled once (the database, decisions' JSON and
//! explain show the same words).

crate::spelled! {
    /// What an event-log record is.
    pub enum EventType("event type") {
        /// A thread's root message.
        TopicRoot = "topic_root",
        /// Human discussion in a thread.
        HumanMessage = "human_message",
        /// The request of a turn (a fact, never an item).
        UserRequest = "user_request",
        /// A bot's answer, visible to the other bots in the thread.
        AgentOutput = "agent_output",
        /// A slash command (a fact, never an item).
        Command = "command",
    }
}

crate::spelled! {
    /// What a context item is: the records the selector may pick.
    pub enum ItemType("item type") {
        /// A thread's root message.
        TopicRoot = "topic_root",
        /// Human discussion.
        HumanMessage = "human_message",
        /// A bot's answer.
        AgentOutput = "agent_output",
    }
}

crate::spelled! {
    /// Who an item's author is.
    pub enum Role("role") {
        /// A person.
        Human = "human",
        /// A bot or an app.
        Bot = "bot",
    }
}

crate::spelled! {
    /// Why the selector left an item out (or which budget cut).
    pub enum Exclusion("exclusion reason") {
        /// A command carries no context.
        Command = "command",
        /// Recalled since it was recorded.
        Recalled = "recalled",
        /// The request of this very turn.
        SameTurnRequest = "same_turn_request",
        /// This bot's own earlier answer.
        OwnOutput = "own_output",
        /// Another profile's record of a message (each profile reads its own).
        OtherProfile = "other_profile",
        /// Discussion in an `owner_only` workspace.
        Mode = "mode",
        /// Over the item budget (`thread_context_limit`).
        Limit = "limit",
        /// Over the character budget (`max_context_chars`).
        Chars = "chars",
        /// Already in the thread context.
        InThreadContext = "in_thread_context",
        /// The topic root, which has its own block.
        TopicRootBlock = "topic_root_block",
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
