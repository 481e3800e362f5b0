//! Executing slash commands. A command carries no context and never reaches the agent;
//! its answer goes out through the [`Outbound`] interface.
//!
//! * `/status` reports and changes nothing: pending history stays pending.
//! * `/new` and `/reset` rotate the session id and clear the history scope.
//! * `/stop` cancels the running turn of the caller's own session key, on whichever
//!   replica it runs, and every handoff chain of the thread (the whole chat for a
//!   main-chat `/stop`): its running turn is stopped, its queued hops cancelled.
//! * Unknown commands get the help text.

use crate::{
    feishu_api::outbound::{Format, Outbound, OutboundError, Reply},
    routing::{Command, HELP},
    store::ReplyKind,
    store::{
        ChainPlace, HandoffStore, SessionReset, SessionRow, SessionStore, StoreError, TurnLeases,
    },
    turns::queue::SessionQueues,
    util::{UnixMs, new_session_id},
    vocab::ChatType,
};

/// Why a command did not complete.
#[derive(Debug, thiserror::Error)]
pub enum CommandError {
    /// The database failed (the pending count, the session's rotation).
    #[error("store: {0}")]
    Store(#[from] StoreError),
    /// Its answer could not be sent.
    #[error(transparent)]
    Reply(#[from] OutboundError),
}

/// One command invocation.
#[derive(Debug)]
pub struct CommandCall<'a> {
    pub command: &'a Command,
    /// The caller's session (created if it was new).
    pub session: &'a SessionRow,
    /// The history scope of the message that carried the command.
    pub history_scope: &'a str,
    /// That message (replies go to it).
    pub message_id: &'a str,
    /// The root of the thread it was sent in (`None` in the main chat).
    pub thread_root: Option<&'a str>,
}

/// The stores a command works on.
#[derive(Clone, Copy)]
pub struct CommandStores<'a> {
    pub sessions: &'a dyn SessionStore,
    pub leases: &'a dyn TurnLeases,
    pub handoffs: &'a dyn HandoffStore,
}

/// Runs a command and sends its answer.
pub async fn execute(
    stores: CommandStores<'_>,
    queues: &SessionQueues,
    outbound: &dyn Outbound,
    call: &CommandCall<'_>,
) -> Result<(), CommandError> {
    let store = stores.sessions;
    let s = call.session;
    let text = match call.command {
        Command::Help => HELP.to_string(),
        Command::Unknown(name) => format!("Unknown command {name}.\n{HELP}"),
        Command::Status => status(store, queues, call).await?,
        Command::New | Command::Reset => reset(store, call).await?,
        Command::Stop => stop(stores, queues, call).await?,
        Command::Sessions => sessions(store, s).await?,
    };
    tracing::info!(profile = %s.profile, session_key = %s.session_key, command = call.command.name(), "command executed");
    outbound
        .send(Reply {
            profile: s.profile.clone(),
            chat_id: s.chat_id.clone(),
            reply_to: Some(call.message_id.to_string()),
            in_thread: s.chat_type != ChatType::P2p,
            kind: ReplyKind::CommandReply,
            text,
            turn_id: None,
            format: Format::Text,
        })
        .await?;
    Ok(())
}

/// `/status`: the session, its pending history and its queue.
async fn status(
    store: &dyn SessionStore,
    queues: &SessionQueues,
    call: &CommandCall<'_>,
) -> Result<String, StoreError> {
    let s = call.session;
    let pending = store
        .pending_history_count(&s.profile, call.history_scope)
        .await?;
    let q = queues.status(&s.session_key);
    Ok(format!(
        "Session {}\nsession id: {}\npending group messages: {pending}\nrunning: {}\nqueued: {}",
        s.session_key,
        s.session_id,
        if q.running { "yes" } else { "no" },
        q.queued
    ))
}

/// `/new` and `/reset`: a fresh session id, the history scope cleared.
async fn reset(store: &dyn SessionStore, call: &CommandCall<'_>) -> Result<String, StoreError> {
    let s = call.session;
    let fresh = new_session_id();
    let row = store
        .reset_session(&SessionReset {
            profile: &s.profile,
            key: &s.session_key,
            history_scope: call.history_scope,
            new_session_id: &fresh,
            now: UnixMs::now(),
        })
        .await?;
    Ok(match row {
        Some(row) => format!(
            "New session started ({}). Earlier group messages will not be sent to the agent.",
            row.session_id
        ),
        None => "No session to reset.".to_string(),
    })
}

/// `/stop`: the session's running turn, wherever it runs: its replica watches for the
/// stop; a turn here is cancelled at once. A turn here that has not started yet
/// (gathering its context, or waiting for one on another replica) is stopped too.
async fn stop(
    stores: CommandStores<'_>,
    queues: &SessionQueues,
    call: &CommandCall<'_>,
) -> Result<String, StoreError> {
    let s = call.session;
    let now = UnixMs::now();
    let asked = stores
        .leases
        .request_stop(&s.profile, &s.session_key, now)
        .await?;
    let stopping = match asked {
        Some(turn) => {
            queues.cancel_label(&turn.turn_id);
            true
        }
        None => queues.cancel_running(&s.session_key),
    };
    let (chain_stopped, hops) = stop_chains(stores, queues, call, now).await?;
    let mut told = if stopping || chain_stopped {
        "Stopping the running answer of this session.".to_string()
    } else {
        "Nothing is running in this session.".to_string()
    };
    if hops > 0 {
        told.push_str(&format!(" Cancelled {hops} queued handoff(s)."));
    }
    Ok(told)
}

/// Stops the handoff chains where `/stop` was sent: their queued hops are cancelled
/// (they never start) and their running turns asked to stop, wherever they run.
/// Whether a running one was asked to stop, and how many hops were cancelled.
async fn stop_chains(
    stores: CommandStores<'_>,
    queues: &SessionQueues,
    call: &CommandCall<'_>,
    now: UnixMs,
) -> Result<(bool, usize), StoreError> {
    let place = ChainPlace {
        chat_id: &call.session.chat_id,
        root_msg_id: call.thread_root,
    };
    let hops = stores.handoffs.cancel_chain_hops(place, now).await?;
    let mut stopped = false;
    for t in stores.handoffs.running_chain_turns(place).await? {
        if let Some(turn) = stores
            .leases
            .request_stop(&t.profile, &t.session_key, now)
            .await?
        {
            queues.cancel_label(&turn.turn_id);
            stopped = true;
        }
    }
    Ok((stopped, hops.len()))
}

/// `/sessions`: the profile's sessions in this chat (at most 20), this one marked.
async fn sessions(store: &dyn SessionStore, s: &SessionRow) -> Result<String, StoreError> {
    let rows = store.sessions(Some(&s.profile), Some(&s.chat_id)).await?;
    let mut out = format!("Sessions of {} in this chat:", s.profile);
    for r in rows.iter().take(20) {
        let mark = if r.session_key == s.session_key {
            " (this one)"
        } else {
            ""
        };
        out.push_str(&format!("\n{} → {}{mark}", r.session_key, r.session_id));
    }
    Ok(out)
}
