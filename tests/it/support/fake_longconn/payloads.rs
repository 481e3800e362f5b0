//! Payloads of pushed frames: the schema 2.0 envelopes HTTP callbacks carry, in
//! plaintext (protocol note §0 "pushes are plaintext", §5 "Inbound frames"), built with
//! the same JSON builders as the webhook tests.

use serde_json::{Value, json};

use crate::support::feishu::{Msg, Signer};

/// `context.open_message_id` of [`card_action`]: the card that was pressed.
pub const CARD_MESSAGE_ID: &str = "om_card";

/// An `im.message.receive_v1` event: a group text message from Alice in `chat_id`,
/// @-mentioning the bot first when `mention_bot`.
pub fn message_event(
    event_id: &str,
    message_id: &str,
    chat_id: &str,
    text: &str,
    mention_bot: bool,
) -> Vec<u8> {
    let msg = Msg::group(message_id, text).in_chat(chat_id);
    let msg = if mention_bot { msg.at_bot() } else { msg };
    event_payload(event_id, &msg)
}

/// The `im.message.receive_v1` event carrying any [`Msg`] (a DM, a thread reply, …).
pub fn event_payload(event_id: &str, msg: &Msg) -> Vec<u8> {
    let envelope = Signer::default().envelope(event_id, "im.message.receive_v1", msg.event());
    envelope.into_bytes()
}

/// A `card.action.trigger` callback (§5 "Card callbacks", D-CB): `operator_open_id`
/// pressed a button whose `value` is `action_value` on card [`CARD_MESSAGE_ID`] in
/// `chat_id`. `header.token` is the test Verification Token; see [`without_token`].
pub fn card_action(
    event_id: &str,
    action_value: Value,
    operator_open_id: &str,
    chat_id: &str,
) -> Vec<u8> {
    let event = json!({
        "operator": {
            "tenant_key": "tenant_test",
            "open_id": operator_open_id,
            "union_id": format!("on_{operator_open_id}"),
            "user_id": "",
        },
        "token": "c-long-connection-update-token",
        "action": {"value": action_value, "tag": "button"},
        "host": "im_message",
        "context": {"open_message_id": CARD_MESSAGE_ID, "open_chat_id": chat_id},
    });
    let envelope = Signer::default().envelope(event_id, "card.action.trigger", event);
    envelope.into_bytes()
}

/// The same payload with `header.token` removed. Authentication happens once, at
/// connect (§0); the docs do not say whether pushes keep the token.
pub fn without_token(payload: &[u8]) -> Vec<u8> {
    let mut v: Value = serde_json::from_slice(payload).expect("a JSON payload");
    if let Some(header) = v["header"].as_object_mut() {
        header.remove("token");
    }
    v.to_string().into_bytes()
}
