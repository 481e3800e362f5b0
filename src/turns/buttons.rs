//! Card buttons: the stop button of a running answer's card, the "new session"
//! button of a finished one, and the answer buttons of an agent's question (their work
//! is in [`super::asks`]). Feishu wants an answer within 3 seconds, so the answer (a
//! toast) is decided from one read of the turn; what the button does runs after it.
//!
//! A button names its turn (`{"action": …, "turn_id": …}`); the turn names the one
//! session it may affect. Only a user who may invoke the bot there may press it: the
//! profile's `allow_users`, the workspace owner in `owner_only` chats, and in sessions
//! that belong to one user (private chats, `per-user` group scope) that user alone.

use std::sync::Arc;

use serde_json::{Value, json};
use tokio::sync::broadcast;

use super::{
    TurnJob,
    asks::{self, ACTION_ANSWER},
    card::{ACTION_NEW_SESSION, ACTION_STOP},
    queue::SessionQueues,
};
use crate::{
    agent::{answer::AnswerSender, events::TurnEventNote},
    config::{Config, WorkspaceMode},
    protocol::events::{self, TypedEvent, UserIds},
    routing::{Sender, may_act_on_session},
    store::{AskStore, SessionReset, SessionStore, TurnLeases, TurnRow, TurnState, TurnStore},
    util::{UnixMs, new_session_id},
};

/// What answering a button reads and acts on.
#[derive(Clone)]
pub struct ButtonContext<'a> {
    /// Profiles and workspaces (who may press).
    pub config: &'a Config,
    /// The turn a button names.
    pub turns: Arc<dyn TurnStore>,
    /// Where a stop for a turn running on another replica is asked.
    pub leases: Arc<dyn TurnLeases>,
    /// Its session, which "new session" rotates.
    pub sessions: Arc<dyn SessionStore>,
    /// Where a running turn is stopped.
    pub queues: &'a SessionQueues,
    /// Where what a button does after its answer runs (the shutdown waits for it).
    pub background: &'a tokio_util::task::TaskTracker,
    /// The asks answer buttons answer.
    pub asks: Arc<dyn AskStore>,
    /// Where a stored answer is announced (the card redraws).
    pub notes: broadcast::Sender<TurnEventNote>,
    /// What delivers a stored answer to the agent.
    pub answers: Arc<AnswerSender>,
}

/// A button press, from either callback form.
#[derive(Debug, Clone)]
struct Press {
    operator: UserIds,
    value: Value,
    chat_id: Option<String>,
}

impl Press {
    fn of(event_type: &str, payload: &str) -> Option<Self> {
        match events::parse(event_type, payload).ok()? {
            TypedEvent::CardAction(a) => Some(Self {
                operator: a.operator,
                value: a.action.value,
                chat_id: a.context.open_chat_id,
            }),
            TypedEvent::LegacyCardAction(a) => Some(Self {
                operator: UserIds {
                    open_id: Some(a.open_id),
                    union_id: None,
                    user_id: a.user_id,
                },
                value: a.action.value,
                chat_id: a.open_chat_id,
            }),
            _ => None,
        }
    }

    /// The button's value: an object, or (legacy cards) its JSON text.
    fn object(&self) -> Option<Value> {
        match &self.value {
            Value::String(s) => serde_json::from_str(s).ok(),
            v => Some(v.clone()),
        }
    }

    /// `(action, turn_id)`.
    fn target(&self) -> Option<(String, String)> {
        let value = self.object()?;
        Some((
            value.get("action")?.as_str()?.to_string(),
            value.get("turn_id")?.as_str()?.to_string(),
        ))
    }

    /// The presser, as routing sees a sender.
    fn sender(&self) -> Sender<'_> {
        Sender {
            open_id: self.operator.open_id.as_deref(),
            union_id: self.operator.union_id.as_deref(),
            user_id: self.operator.user_id.as_deref(),
            sender_type: "user",
        }
    }
}

/// How long an answer may wait for a button's work (Feishu gives up after 3 s, and the
/// callback was stored first).
const ANSWER_WITHIN: std::time::Duration = std::time::Duration::from_millis(1000);

/// A toast answer.
fn toast(kind: &str, content: &str) -> Value {
    json!({"toast": {"type": kind, "content": content}})
}

/// Answers a stored card callback of `profile` (the body Feishu shows), starting what
/// the button does.
pub async fn answer(
    cx: ButtonContext<'_>,
    profile: &str,
    event_type: &str,
    payload: &str,
) -> Value {
    let Some(press) = Press::of(event_type, payload) else {
        return json!({});
    };
    let Some((action, turn_id)) = press.target() else {
        // Not one of this bridge's buttons.
        return json!({});
    };
    let turn = match pressed_turn(&cx, profile, &turn_id).await {
        Ok(turn) => turn,
        Err(answer) => return answer,
    };
    let job = serde_json::from_str::<TurnJob>(&turn.job_json).ok();
    if press.chat_id.as_ref().is_some_and(|c| *c != turn.chat_id)
        || !may_press(cx.config, &press, &turn, job.as_ref())
    {
        tracing::info!(profile, turn_id = %turn.turn_id, action, "card action refused: not allowed");
        return toast("error", "You cannot do that for this conversation.");
    }
    tracing::info!(profile, turn_id = %turn.turn_id, session_key = %turn.session_key, action, "card action");
    match action.as_str() {
        ACTION_STOP => stop(&cx, turn),
        ACTION_ANSWER => {
            let value = press.object().unwrap_or_default();
            let answering = asks::Answering {
                store: cx.asks.clone(),
                notes: cx.notes.clone(),
                answers: cx.answers.clone(),
                background: cx.background,
            };
            asks::answer(answering, &turn, &value, press.operator.open_id.as_deref()).await
        }
        ACTION_NEW_SESSION => match job {
            Some(job) => new_session(&cx, turn, job.history_scope).await,
            None => toast("error", "This conversation can no longer be reset."),
        },
        _ => toast("info", "Unknown action."),
    }
}

/// The turn a button of `profile` names, or the toast that says why there is none.
async fn pressed_turn(
    cx: &ButtonContext<'_>,
    profile: &str,
    turn_id: &str,
) -> Result<TurnRow, Value> {
    match cx.turns.turn(turn_id).await {
        Ok(Some(t)) if t.profile == profile => Ok(t),
        Ok(_) => Err(toast(
            "error",
            "This button belongs to an answer I do not know.",
        )),
        Err(e) => {
            tracing::warn!(error = %e, "card action: turn not readable");
            Err(toast(
                "error",
                "The bridge cannot read its database right now; try again.",
            ))
        }
    }
}

/// The stop button: cancels the turn here, asks its replica to stop it, or cancels it
/// before it starts.
fn stop(cx: &ButtonContext<'_>, turn: TurnRow) -> Value {
    if cx.queues.cancel_label(&turn.turn_id) {
        toast("success", "Stopping this answer.")
    } else if turn.state == TurnState::Running {
        // Running on another replica: it watches for the stop.
        let leases = cx.leases.clone();
        cx.background.spawn(async move {
            if let Err(e) = leases.request_stop_turn(&turn.turn_id, UnixMs::now()).await {
                tracing::warn!(turn_id = %turn.turn_id, error = %e, "a stop for a turn on another replica was not recorded; it runs on");
            }
        });
        toast("success", "Stopping this answer.")
    } else if turn.state == TurnState::Queued {
        // Not started yet: it never will.
        let store = cx.turns.clone();
        cx.background.spawn(async move {
            // `false` only means the turn ended meanwhile: nothing to record.
            if let Err(e) = store
                .end_turn(
                    &turn.turn_id,
                    TurnState::Cancelled,
                    "stopped by the user",
                    UnixMs::now(),
                )
                .await
            {
                tracing::warn!(turn_id = %turn.turn_id, error = %e, "a queued turn stopped from a card was not recorded as cancelled; it may still run");
            }
        });
        toast("success", "Cancelled before it started.")
    } else {
        toast("info", "This answer has already finished.")
    }
}

/// The "new session" button: rotates the turn's session, clearing `scope`'s history.
async fn new_session(cx: &ButtonContext<'_>, turn: TurnRow, scope: String) -> Value {
    // One write, in a task of its own: the answer waits for it only briefly, so a slow
    // database delays the reset, never Feishu's answer.
    let store = cx.sessions.clone();
    let reset = cx.background.spawn(async move {
        let fresh = new_session_id();
        let done = store
            .reset_session(&SessionReset {
                profile: &turn.profile,
                key: &turn.session_key,
                history_scope: &scope,
                new_session_id: &fresh,
                now: UnixMs::now(),
            })
            .await;
        match &done {
            Ok(_) => {
                tracing::info!(profile = %turn.profile, session_key = %turn.session_key, "session reset from a card")
            }
            Err(e) => tracing::warn!(error = %e, "session reset from a card failed"),
        }
        done.is_ok()
    });
    match tokio::time::timeout(ANSWER_WITHIN, reset).await {
        Ok(Ok(true)) => toast(
            "success",
            "New session started: earlier messages will not be sent to the agent.",
        ),
        Ok(_) => toast("error", "The session could not be reset; try again."),
        Err(_) => toast("info", "Starting a new session…"),
    }
}

/// Whether the presser may act on this turn's session (see [`may_act_on_session`]).
fn may_press(config: &Config, press: &Press, turn: &TurnRow, job: Option<&TurnJob>) -> bool {
    let Some(profile) = config.profile(&turn.profile) else {
        return false;
    };
    let owner_only = job.and_then(|j| j.workspace_mode) == Some(WorkspaceMode::OwnerOnly);
    let owner = owner_only.then(|| {
        config
            .workspace(&turn.chat_id)
            .and_then(|w| w.owner.as_deref())
            .unwrap_or_default()
    });
    may_act_on_session(profile, owner, &press.sender(), &turn.session_key)
}
