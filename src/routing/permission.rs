//! Who may do what: invoke a profile's agent, and act on a session (its card buttons).
//! Observing a message never grants either.

use super::{session_key::Place, verdict::Reason};
use crate::config::{Profile, Workspace, WorkspaceMode};

/// The sender, as the event names it.
#[derive(Debug, Clone, Default)]
pub struct Sender<'a> {
    /// Per-app id.
    pub open_id: Option<&'a str>,
    /// Per-developer id.
    pub union_id: Option<&'a str>,
    /// Per-tenant id.
    pub user_id: Option<&'a str>,
    /// `user`, or `bot`/`app`.
    pub sender_type: &'a str,
}

impl Sender<'_> {
    pub(super) fn is_user(&self) -> bool {
        self.sender_type == "user"
    }

    /// Whether any of the sender's ids is in `list`.
    pub fn is_one_of(&self, list: &[String]) -> bool {
        [self.open_id, self.union_id, self.user_id]
            .into_iter()
            .flatten()
            .any(|id| !id.is_empty() && list.iter().any(|a| a == id))
    }
}

/// Whether the profile takes part in the group chat `chat_id` at all: `group_enabled`,
/// and one of `allow_chats` when set. `Err` names the reason.
pub fn group_admits(p: &Profile, chat_id: &str) -> Result<(), Reason> {
    if !p.group_enabled {
        return Err(Reason::GroupDisabled);
    }
    if !p.allow_chats.is_empty() && !p.allow_chats.iter().any(|c| c == chat_id) {
        return Err(Reason::ChatNotAllowed);
    }
    Ok(())
}

/// The owner of a workspace in `owner_only` mode (empty when it names none, so that no
/// one matches), for [`may_invoke`]; `None` in any other mode.
pub fn owner_of(workspace: Option<&Workspace>) -> Option<&str> {
    workspace
        .filter(|w| w.mode == WorkspaceMode::OwnerOnly)
        .map(|w| w.owner.as_deref().unwrap_or_default())
}

/// Whether `sender` may invoke the profile's agent: one of `allow_users` (when set) and,
/// in an `owner_only` workspace (`owner` given), its owner. `Err` names the reason.
pub fn may_invoke(p: &Profile, owner: Option<&str>, sender: &Sender<'_>) -> Result<(), Reason> {
    if !p.allow_users.is_empty() && !sender.is_one_of(&p.allow_users) {
        return Err(Reason::UserNotAllowed);
    }
    if owner.is_some_and(|o| !sender.is_one_of(&[o.to_string()])) {
        return Err(Reason::NotOwner);
    }
    Ok(())
}

/// Whether `sender` may act on a session from its answer's card (stop, new session):
/// someone who may invoke the profile's agent there (`owner` as for [`may_invoke`]),
/// and for a session of one person's conversation (a private chat, `per-user` group
/// scope), that person alone.
pub fn may_act_on_session(
    p: &Profile,
    owner: Option<&str>,
    sender: &Sender<'_>,
    session_key: &str,
) -> bool {
    may_invoke(p, owner, sender).is_ok()
        && Place::personal_owner(session_key).is_none_or(|o| sender.is_one_of(&[o.to_string()]))
}
