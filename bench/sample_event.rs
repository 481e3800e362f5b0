//! The realistic `im.message.receive_v1` callback used by the ingress benchmark and the
//! load generator (shared by both through `#[path]`): a group text message that
//! @-mentions the bot and one person, about 1.5 KB of plaintext.

/// What varies between sample events.
pub struct Sample<'a> {
    /// `header.event_id`.
    pub event_id: &'a str,
    /// `event.message.message_id`.
    pub message_id: &'a str,
    /// `event.message.chat_id`.
    pub chat_id: &'a str,
    /// Sender ids: (union_id, user_id, open_id).
    pub sender: (&'a str, &'a str, &'a str),
    /// Verification token.
    pub token: &'a str,
    /// App id.
    pub app_id: &'a str,
    /// ms, for `header.create_time` and the message times.
    pub create_time_ms: &'a str,
    /// Message text (with `@_user_1 @_user_2` keys).
    pub text: &'a str,
}

/// The plaintext callback JSON.
pub fn sample_event(s: &Sample<'_>) -> String {
    let content = serde_json::json!({ "text": s.text }).to_string();
    serde_json::json!({
        "schema": "2.0",
        "header": {
            "event_id": s.event_id,
            "token": s.token,
            "create_time": s.create_time_ms,
            "event_type": "im.message.receive_v1",
            "tenant_key": "2ca1d211f64f6438",
            "app_id": s.app_id
        },
        "event": {
            "sender": {
                "sender_id": {"union_id": s.sender.0, "user_id": s.sender.1, "open_id": s.sender.2},
                "sender_type": "user",
                "tenant_key": "2ca1d211f64f6438"
            },
            "message": {
                "message_id": s.message_id,
                "root_id": "om_1a2b3c4d5e6f708192a3b4c5d6e7f809",
                "parent_id": "om_1a2b3c4d5e6f708192a3b4c5d6e7f809",
                "create_time": s.create_time_ms,
                "update_time": s.create_time_ms,
                "chat_id": s.chat_id,
                "thread_id": "omt_1a2b3c4d5e6f7081",
                "chat_type": "group",
                "message_type": "text",
                "content": content,
                "mentions": [
                    {
                        "key": "@_user_1",
                        "id": {
                            "union_id": "on_1f2e3d4c5b6a79880716253443526170",
                            "user_id": "",
                            "open_id": "ou_0b7f2c3d4e5f60718293a4b5c6d7e8f9"
                        },
                        "mentioned_type": "bot",
                        "name": "Bridge Bot",
                        "tenant_key": "2ca1d211f64f6438"
                    },
                    {
                        "key": "@_user_2",
                        "id": {
                            "union_id": "on_9a8b7c6d5e4f30211203948576abcdef",
                            "user_id": "5d7f2a1c",
                            "open_id": "ou_7e6d5c4b3a29180716253443526170ab"
                        },
                        "mentioned_type": "user",
                        "name": "Li Wei",
                        "tenant_key": "2ca1d211f64f6438"
                    }
                ]
            }
        }
    })
    .to_string()
}
