//! One routed message: the message as recorded and the route it took. Its verdict, its
//! records, its session mapping and its turn are all made from this one value, and
//! written together in one transaction.

use super::commands::CommandCall;
use crate::{
    context::collector::{self, Message},
    routing::{Command, Route},
    store::{NewSession, NewVerdict, RouteWrite, SessionRow},
    turns::TurnJob,
    util::{UnixMs, new_session_id},
};

/// A message and its route, with the turn it starts (if it is a request).
#[derive(Debug, Clone)]
pub struct RoutedMessage {
    /// The message as recorded.
    pub message: Message,
    /// What routing decided.
    pub route: Route,
    /// Display names learned from its mentions: `(open_id, name)`.
    pub names: Vec<(String, String)>,
    /// The turn an invocation without a command starts (its id fixed once).
    pub job: Option<TurnJob>,
}

impl RoutedMessage {
    /// The message routed as `route`.
    pub fn new(message: Message, route: Route, names: Vec<(String, String)>) -> Self {
        let job = match (&route.session_key, &route.command) {
            (Some(key), None) => Some(TurnJob::for_request(&message, key, route.mode)),
            _ => None,
        };
        Self {
            message,
            route,
            names,
            job,
        }
    }

    /// Everything it writes, at `now`: the verdict, the records, the session mapping
    /// (created or touched) and the turn it queues, owned by `owner` (so that a crash
    /// right after the write cannot lose the turn).
    pub fn write(&self, now: UnixMs, owner: &str) -> RouteWrite {
        let m = &self.message;
        RouteWrite {
            verdict: NewVerdict {
                profile: m.profile.clone(),
                message_id: m.message_id.clone(),
                chat_id: m.place.chat_id.clone(),
                verdict: self.route.verdict,
                reason: self.route.reason,
                session_key: self.route.session_key.clone(),
                created_at: now,
            },
            events: collector::records(&self.route, m),
            session: self.route.session_key.as_ref().map(|key| NewSession {
                profile: m.profile.clone(),
                session_key: key.clone(),
                session_id: new_session_id(),
                chat_id: m.place.chat_id.clone(),
                chat_type: m.chat_type,
                user_id: Some(m.actor_id.clone()),
                root_msg_id: (!m.place.is_dm).then(|| m.place.root_msg_id.clone()),
                history_scope: m.history_scope.clone(),
                now,
            }),
            names: self.names.clone(),
            turn: self.job.as_ref().map(|j| j.to_new_turn(now, owner)),
            feed: None,
        }
    }

    /// The command it carries, as called in `session`.
    pub fn command<'a>(&'a self, session: &'a SessionRow) -> Option<CommandCall<'a>> {
        let command: &Command = self.route.command.as_ref()?;
        Some(CommandCall {
            command,
            session,
            history_scope: &self.message.history_scope,
            message_id: &self.message.message_id,
            thread_root: (!self.message.place.is_root())
                .then_some(self.message.place.root_msg_id.as_str()),
        })
    }
}
