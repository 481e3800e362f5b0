//! Session keys and history scopes.
//!
//! Thread rule: a message belongs to a thread only when Feishu gives it a `thread_id`;
//! its `root_msg_id` is then its `root_id`. Every other message — including a quote-reply
//! in the main chat, which carries `root_id`/`parent_id` but no `thread_id` — is its own
//! root: `root_msg_id` is its own `message_id`, and it stays in the chat's history scope.
//! So quoting a message never forks a thread scope by accident; the quoted message
//! reaches the agent through the quoted-reply path instead.

use crate::{
    config::{GroupScope, Profile},
    vocab::ChatType,
};

/// Where a message sits in its chat.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Place {
    /// `oc_…`
    pub chat_id: String,
    /// Private chat.
    pub is_dm: bool,
    /// The thread's root message id (the message's own id outside threads).
    pub root_msg_id: String,
    /// The message is a reply inside a thread (not the thread's root).
    pub in_thread: bool,
}

impl Place {
    /// Works out the place from the message's ids.
    pub fn of(
        chat_id: &str,
        chat_type: ChatType,
        message_id: &str,
        root_id: Option<&str>,
        thread_id: Option<&str>,
    ) -> Self {
        let root = match (
            thread_id.filter(|t| !t.is_empty()),
            root_id.filter(|r| !r.is_empty()),
        ) {
            (Some(_), Some(root)) => root,
            _ => message_id,
        };
        Self {
            chat_id: chat_id.to_string(),
            is_dm: chat_type == ChatType::P2p,
            root_msg_id: root.to_string(),
            in_thread: root != message_id,
        }
    }

    /// The message is its thread's root (or a main-chat message).
    pub fn is_root(&self) -> bool {
        !self.in_thread
    }

    /// `chat:<chat_id>`, or `thread:<chat_id>:<root_id>` for a thread reply when the
    /// profile isolates threads.
    pub fn history_scope(&self, profile: &Profile) -> String {
        if profile.thread_isolation && self.in_thread {
            format!("thread:{}:{}", self.chat_id, self.root_msg_id)
        } else {
            format!("chat:{}", self.chat_id)
        }
    }

    /// The key the batched feed gathers this (un-mentioned) message under: its history
    /// scope's one session when the scope has exactly one — `group:<chat_id>` for a
    /// chat shared by everyone without isolated threads, `thread:<chat_id>:<root_id>`
    /// for a reply in an isolated thread — else the chat itself, `chat:<chat_id>`,
    /// whose segments are given to each session of the chat that is invoked.
    pub fn feed_key(&self, profile: &Profile) -> String {
        let scope = self.history_scope(profile);
        if scope.starts_with("thread:") {
            return scope;
        }
        if !profile.thread_isolation && profile.group_scope == GroupScope::SharedChat {
            return format!("group:{}", self.chat_id);
        }
        scope
    }

    /// The user a session key belongs to, for keys of one person's conversation
    /// (`dm:<open_id>`, `group-user:<chat_id>:<open_id>`); `None` for shared keys.
    pub fn personal_owner(key: &str) -> Option<&str> {
        key.strip_prefix("dm:").or_else(|| {
            key.strip_prefix("group-user:")
                .and_then(|rest| rest.rsplit_once(':'))
                .map(|(_, open_id)| open_id)
        })
    }

    /// The session key for a message from `open_id` here.
    pub fn session_key(&self, profile: &Profile, open_id: &str) -> String {
        if self.is_dm {
            return format!("dm:{open_id}");
        }
        if profile.thread_isolation || profile.group_scope == GroupScope::Thread {
            return format!("thread:{}:{}", self.chat_id, self.root_msg_id);
        }
        match profile.group_scope {
            GroupScope::PerUser => format!("group-user:{}:{open_id}", self.chat_id),
            GroupScope::SharedChat | GroupScope::Thread => format!("group:{}", self.chat_id),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn profile(thread_isolation: bool, group_scope: GroupScope) -> Profile {
        let mut p = crate::config::load_from_str(
            "[[profiles]]\nname = \"p\"\napp_id = \"a\"\nverification_token = \"t\"\ndry_run = true\n",
            &|_| None,
        )
        .expect("config")
        .profiles
        .remove(0);
        p.thread_isolation = thread_isolation;
        p.group_scope = group_scope;
        p
    }

    #[test]
    fn quote_reply_outside_a_thread_stays_in_the_chat_scope() {
        let p = Place::of("oc_1", ChatType::Group, "om_3", Some("om_1"), None);
        assert_eq!(p.root_msg_id, "om_3");
        assert!(p.is_root());
        assert_eq!(
            p.history_scope(&profile(true, GroupScope::SharedChat)),
            "chat:oc_1"
        );
    }

    #[test]
    fn thread_replies_get_the_thread_scope_when_isolated() {
        let p = Place::of("oc_1", ChatType::Group, "om_3", Some("om_1"), Some("omt_1"));
        assert_eq!((p.root_msg_id.as_str(), p.in_thread), ("om_1", true));
        assert_eq!(
            p.history_scope(&profile(true, GroupScope::SharedChat)),
            "thread:oc_1:om_1"
        );
        assert_eq!(
            p.history_scope(&profile(false, GroupScope::SharedChat)),
            "chat:oc_1"
        );
    }

    #[test]
    fn the_feed_gathers_under_the_scope_s_one_session_or_the_chat() {
        let main = Place::of("oc_1", ChatType::Group, "om_3", None, None);
        let reply = Place::of("oc_1", ChatType::Group, "om_4", Some("om_1"), Some("omt_1"));
        let defaults = profile(true, GroupScope::SharedChat);
        assert_eq!(main.feed_key(&defaults), "chat:oc_1");
        assert_eq!(reply.feed_key(&defaults), "thread:oc_1:om_1");
        let shared = profile(false, GroupScope::SharedChat);
        assert_eq!(main.feed_key(&shared), "group:oc_1");
        assert_eq!(reply.feed_key(&shared), "group:oc_1");
        for scope in [GroupScope::PerUser, GroupScope::Thread] {
            assert_eq!(main.feed_key(&profile(false, scope)), "chat:oc_1");
            assert_eq!(reply.feed_key(&profile(false, scope)), "chat:oc_1");
        }
    }

    #[test]
    fn session_keys_follow_scope_settings() {
        let t = Place::of("oc_1", ChatType::Group, "om_3", Some("om_1"), Some("omt_1"));
        assert_eq!(
            t.session_key(&profile(true, GroupScope::SharedChat), "ou_a"),
            "thread:oc_1:om_1"
        );
        assert_eq!(
            t.session_key(&profile(false, GroupScope::SharedChat), "ou_a"),
            "group:oc_1"
        );
        assert_eq!(
            t.session_key(&profile(false, GroupScope::PerUser), "ou_a"),
            "group-user:oc_1:ou_a"
        );
        assert_eq!(
            t.session_key(&profile(false, GroupScope::Thread), "ou_a"),
            "thread:oc_1:om_1"
        );
        let dm = Place::of("oc_dm", ChatType::P2p, "om_9", None, None);
        assert_eq!(
            dm.session_key(&profile(true, GroupScope::SharedChat), "ou_a"),
            "dm:ou_a"
        );
    }
}
