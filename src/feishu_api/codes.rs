//! What Feishu's error codes mean to the bridge: which are worth waiting for, which need
//! a fresh token, which say the target is gone, and which say the content is too large.
//! Taken from the Open API's error pages (message create/reply/patch, CardKit) and the
//! official SDKs' token handling.

/// "Slow down, then try again": the platform limit (99991400, HTTP 429), the message
/// send limits (11232, 11233, 11247) and the message API's own (230020), and 230049
/// (the message service asking to be called again).
pub const RATE_LIMITED: [i64; 6] = [99991400, 11232, 11233, 11247, 230020, 230049];

/// The tenant token is no good (invalid or expired, invalid tenant token, malformed):
/// take a fresh one and call again, once (the Go SDK retries on the same codes).
pub const TOKEN_INVALID: [i64; 3] = [99991663, 99991664, 99991671];

/// A thread reply is refused here: the chat does not support replies in thread
/// (230071), or the message is an aggregated one (230072). Either way the reply can go
/// to the chat instead.
pub const NO_THREAD: [i64; 2] = [230071, 230072];

/// The chat itself takes no replies in thread (230071), so every later reply there is
/// refused too. 230072 is about one message only: an aggregated (merged) message.
pub const CHAT_WITHOUT_THREADS: [i64; 1] = [230071];

/// The card is in an interaction (a user's press is being answered): CardKit and
/// message updates of it are refused until that ends (200810, "The card is in an
/// ongoing interaction and cannot be updated"). Worth calling again shortly.
pub const INTERACTING: [i64; 1] = [200810];

/// A CardKit card's streaming mode is off: it timed out, ten minutes after it was
/// turned on (200850), or was turned off (300309). Turning it on again (the settings
/// call) lets the text stream on.
pub const STREAMING_OFF: [i64; 2] = [200850, 300309];

/// The content is over the size limit: a message or card update (230025), a CardKit
/// card (200860).
pub const TOO_LARGE: [i64; 2] = [230025, 200860];

/// The message replied to is gone: recalled (230011) or deleted (230110). Calling it
/// again cannot help.
pub const TARGET_GONE: [i64; 2] = [230011, 230110];

/// When reading a message: "not there for you" rather than a failure — recalled
/// (230011), deleted (230110), not visible to the bot (230050), the bot is not in its
/// chat (230002). An invalid parameter (230001) is a failure, not an absence.
pub const NOT_READABLE: [i64; 4] = [230011, 230110, 230050, 230002];

/// The app lacks a scope the call needs (99991672, "Access denied. One of the following
/// scopes is required"): nothing changes until someone grants it in the console.
pub const MISSING_SCOPE: [i64; 1] = [99991672];

/// Whether `code` is in `set`.
pub fn is(set: &[i64], code: i64) -> bool {
    set.contains(&code)
}

/// A message resource that cannot be had: the key is not in that message (234003), the
/// app is not in the message's chat (234004), the app may not read it (234009), or
/// the message was recalled or deleted (230011, 230110). Asking again cannot help.
pub const RESOURCE_GONE: [i64; 5] = [234003, 234004, 234009, 230011, 230110];

/// An upload refused for its size: over the limit (234006), or empty (234010).
pub const UPLOAD_SIZE: [i64; 2] = [234006, 234010];

/// A doc the bot may not read: the docx refuses it (1770032), the wiki node or space
/// does (131006).
pub const DOC_FORBIDDEN: [i64; 2] = [1770032, 131006];
