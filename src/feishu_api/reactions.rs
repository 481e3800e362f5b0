//! Emoji reactions on a message: adding one
//! (`POST /open-apis/im/v1/messages/{message_id}/reactions`, body
//! `{"reaction_type":{"emoji_type":"…"}}`, answering `data.reaction_id`) and removing
//! one by its id (`DELETE /open-apis/im/v1/messages/{message_id}/reactions/{reaction_id}`).
//!
//! What Feishu documents for both (`im-v1/message-reaction/create`, `…/delete`):
//! - limits: 1,000 calls a minute and 50 a second per app (the app's budget keeps
//!   every call under them; a refusal is the platform's 99991400, retried as usual);
//! - scopes: either `im:message` or `im:message.reactions:write_only` (an app that only
//!   has `im:message:send_as_bot` is refused with 99991672);
//! - a recalled message takes no reaction, nor does a system message;
//! - a bot can only remove the reactions it added itself.
//!
//! Codes (400): 231001 the `emoji_type` is not one of Feishu's; 231002 the bot may not
//! react to that message (not in its chat); 231003 the message is not found (a wrong
//! id, recalled or deleted); 231004 its chat is gone (dissolved, archived); 231005 the
//! thread was removed; 231007 the reaction is not the bot's to remove; 231008 the bot
//! cannot access the message; 231010 the reaction is not on that message; 231011 no
//! such reaction; 231015 the same request is still being processed.

use serde::Deserialize;
use serde_json::json;

use super::{FeishuClient, OpenApiError, budget::Urgency, call::Call};

/// Adding a reaction, as errors name it.
const ADD_ENDPOINT: &str = "POST /open-apis/im/v1/messages/{message_id}/reactions";
/// Removing a reaction, as errors name it.
const DELETE_ENDPOINT: &str =
    "DELETE /open-apis/im/v1/messages/{message_id}/reactions/{reaction_id}";

/// The narrowest scope that allows adding and removing reactions (`im:message` allows
/// them too).
pub const REACTIONS_SCOPE: &str = "im:message.reactions:write_only";

/// The `emoji_type` is not one Feishu knows.
pub const UNKNOWN_EMOJI: [i64; 1] = [231001];

/// Nothing to react to any more, or nothing left to remove: the message is gone or out
/// of reach (231002, 231003, 231004, 231005, 231008), or the reaction is (231007,
/// 231010, 231011). Calling again cannot help.
pub const REACTION_GONE: [i64; 8] = [
    231002, 231003, 231004, 231005, 231007, 231008, 231010, 231011,
];

#[derive(Deserialize)]
struct AddAnswer {
    #[serde(default)]
    data: Option<Added>,
}

#[derive(Deserialize)]
struct Added {
    #[serde(default)]
    reaction_id: Option<String>,
}

impl FeishuClient {
    /// Adds `emoji_type` to the message as this app; the new reaction's id.
    pub async fn add_reaction(
        &self,
        message_id: &str,
        emoji_type: &str,
        urgency: Urgency,
    ) -> Result<String, OpenApiError> {
        let body = json!({ "reaction_type": { "emoji_type": emoji_type } });
        let call = Call {
            method: reqwest::Method::POST,
            endpoint: ADD_ENDPOINT,
            url: format!(
                "{}/open-apis/im/v1/messages/{message_id}/reactions",
                self.base
            ),
            query: &[],
            urgency,
        };
        let answer: AddAnswer = self.call(call, || Some(body.clone())).await?;
        answer
            .data
            .and_then(|d| d.reaction_id)
            .filter(|id| !id.is_empty())
            .ok_or(OpenApiError::Missing {
                endpoint: ADD_ENDPOINT,
                missing: "data.reaction_id",
            })
    }

    /// Removes a reaction this app added (a required call: retried).
    pub async fn delete_reaction(
        &self,
        message_id: &str,
        reaction_id: &str,
    ) -> Result<(), OpenApiError> {
        let call = Call {
            method: reqwest::Method::DELETE,
            endpoint: DELETE_ENDPOINT,
            url: format!(
                "{}/open-apis/im/v1/messages/{message_id}/reactions/{reaction_id}",
                self.base
            ),
            query: &[],
            urgency: Urgency::Required,
        };
        self.call::<serde::de::IgnoredAny>(call, || None)
            .await
            .map(|_| ())
    }
}
