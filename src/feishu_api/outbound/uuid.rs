//! The `uuid` of each message the bridge posts. Feishu keeps a uuid for an hour and
//! posts a repeated one at most once, answering with the first message — even when the
//! content differs. So the uuid follows the content: it derives from the reply's place
//! (profile, chat, the message replied to), its turn, its kind, the part's index, and a
//! hash of exactly what is posted. A retry of the same part (after a timeout, a restart,
//! a database failure) gets the same uuid and posts once; a different text gets another.

use sha2::{Digest, Sha256};

use super::Reply;
use crate::feishu_api::reply::Content;

/// The uuid of part `part` of `reply`, posted as `content`.
pub(super) fn part(reply: &Reply, part: usize, content: Content<'_>) -> String {
    let (msg_type, encoded) = content.encode();
    let mut h = Sha256::new();
    for piece in [
        reply.profile.as_str(),
        &reply.chat_id,
        reply.reply_to.as_deref().unwrap_or(""),
        reply.turn_id.as_deref().unwrap_or(""),
        reply.kind.as_str(),
        msg_type,
    ] {
        h.update(piece.as_bytes());
        h.update([0]);
    }
    h.update(part.to_le_bytes());
    h.update(Sha256::digest(encoded.as_bytes()));
    hex::encode(h.finalize())[..32].to_string()
}

/// The uuid of the same part sent again as a quote in the chat, after the chat refused
/// it as a reply in thread (Feishu wants a new uuid for the new request).
pub(super) fn unthreaded(uuid: &str) -> String {
    let mut h = Sha256::new();
    h.update(b"unthreaded\0");
    h.update(uuid.as_bytes());
    hex::encode(h.finalize())[..32].to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{feishu_api::outbound::Format, store::ReplyKind};

    fn reply(text: &str) -> Reply {
        Reply {
            profile: "planner".into(),
            chat_id: "oc_1".into(),
            reply_to: Some("om_1".into()),
            in_thread: true,
            kind: ReplyKind::Answer,
            text: text.into(),
            turn_id: Some("turn_1".into()),
            format: Format::Text,
        }
    }

    #[test]
    fn the_same_content_keeps_its_uuid_and_other_content_gets_another() {
        let a = part(&reply("a"), 0, Content::Text("a"));
        assert_eq!(a, part(&reply("a"), 0, Content::Text("a")));
        assert_eq!(a.len(), 32, "Feishu takes at most 50 characters");
        assert_ne!(a, part(&reply("b"), 0, Content::Text("b")));
        assert_ne!(a, part(&reply("a"), 1, Content::Text("a")));
        assert_ne!(a, part(&reply("a"), 0, Content::Markdown("a")));
        assert_ne!(a, unthreaded(&a));
        assert_eq!(unthreaded(&a), unthreaded(&a));
    }
}
