//! What-if explain: a stored decision's selection made again under other settings,
//! through the same pure selector the turn used, without calling any agent.
//!
//! Inputs are the decision's record and the event log as it was then:
//! * the candidates the decision looked at are read back by item id; a recalled one
//!   comes flagged (the selector leaves it out as `recalled`), one no longer in the log
//!   is shown as `purged`;
//! * a context part the decision did not use (thread context or pending history turned
//!   on), or a larger item limit than the decision's read window held, reads the
//!   thread's or scope's items said no later than the decision (Feishu's create time
//!   against the decision's time);
//! * the quoted reply, topic root, carried summary and media blocks stay as recorded;
//!   the carried summary counts against the character budget as in the gatherer.

use std::collections::HashSet;

use super::{
    Query, diff, find,
    overrides::Overrides,
    recorded::Recorded,
    shape::{Settings, WhatIf, WouldBe},
};
use crate::{
    config::{Config, WorkspaceMode},
    context::{
        report::{ExcludedItem, SelectedItem},
        selector::{self, Request, Selection},
    },
    store::{DecisionRow, DecisionStore, EventLog, HandoffStore, StoreError, TurnStore},
    vocab::{Candidate, Exclusion, ItemType},
};

/// Re-runs the decision `q` names under `o`; `None` when there is no such decision.
pub async fn what_if<S>(
    store: &S,
    q: &Query<'_>,
    o: &Overrides,
    config: &Config,
) -> Result<Option<WhatIf>, StoreError>
where
    S: DecisionStore + EventLog + TurnStore + HandoffStore + ?Sized,
{
    let Some(row) = find(store, q).await? else {
        return Ok(None);
    };
    let rec = Recorded::of(&row);
    let mut notes = Vec::new();
    let recorded = recorded_settings(&rec, &row, config, &mut notes);
    let settings = apply(&recorded, o, &mut notes);
    if !rec.details {
        notes.push(
            "a message of this decision was recalled: its item details and blocks were \
             scrubbed, so only item ids are compared"
                .into(),
        );
    }
    let request_id = request_in_context(store, &row).await?;
    let d = &row.decision;
    let req = Request {
        bridge_id: &d.bridge_id,
        profile: &d.bot_profile,
        mode: mode_of(&settings.workspace_mode),
        message_id: &request_id,
        is_command: false,
        limit: settings.thread_context_limit,
        max_chars: settings.max_context_chars.saturating_sub(rec.carried_chars),
        max_agent_output_chars: settings.max_agent_output_chars,
    };
    let kept: HashSet<i64> = rec.kept_ids().collect();
    let mut purged = Vec::new();

    let mut thread = Selection::default();
    if settings.shared_thread_enabled {
        let mut candidates = by_id(store, &rec.thread_ids, &rec, &mut purged).await?;
        let read = selector::thread_read_window(recorded.thread_context_limit);
        let wanted = selector::thread_read_window(settings.thread_context_limit);
        let first_read = !rec.thread_on;
        if first_read || (wanted > read && rec.thread_read >= read as usize) {
            let t = crate::store::ProfileThread::new(&d.bot_profile, &d.chat_id, &d.root_msg_id);
            let fresh = store
                .thread_candidates_said_by(t, d.created_at, wanted)
                .await?;
            merge(&mut candidates, fresh, &kept);
            if first_read {
                notes.push("thread context: the thread's items said by the decision's time".into());
            }
        }
        let injected = rec.topic_root_injected();
        let (in_block, candidates): (Vec<Candidate>, Vec<Candidate>) =
            candidates.into_iter().partition(|c| {
                injected
                    && !rec.thread_ids.contains(&c.item_id)
                    && c.item_type == ItemType::TopicRoot
                    && c.message_id == d.root_msg_id
            });
        thread = selector::select_thread(&req, candidates);
        thread.excluded.extend(
            in_block
                .iter()
                .map(|c| selector::exclusion(c, Exclusion::TopicRootBlock)),
        );
    }
    let mut history = Selection::default();
    if settings.group_chat_history_share {
        let mut candidates = by_id(store, &rec.history_ids, &rec, &mut purged).await?;
        if !rec.history_on {
            let fresh = scope_said_by(store, &row).await?;
            merge(&mut candidates, fresh, &kept);
            notes.push(
                "pending history: the scope's newest items said by the decision's time \
                 (the watermark of that moment is not recorded)"
                    .into(),
            );
        }
        let in_thread: Vec<i64> = thread.selected.iter().map(|s| s.item_id).collect();
        history = selector::select_pending(&req, candidates, &in_thread);
    }
    let would_be = would_be(&rec, thread, history, purged);
    let diff = diff::compare(&rec, &would_be);
    Ok(Some(WhatIf {
        decision_id: row.id,
        profile: d.bot_profile.clone(),
        root_msg_id: d.root_msg_id.clone(),
        message_id: d.message_id.clone(),
        recorded,
        settings,
        selection: would_be,
        diff,
        notes,
    }))
}

/// The settings the decision was made under: its diagnostics' budgets, its mode and
/// workspace mode; what it does not record comes from the current config.
fn recorded_settings(
    rec: &Recorded,
    row: &DecisionRow,
    config: &Config,
    notes: &mut Vec<String>,
) -> Settings {
    let d = &row.decision;
    let c = &config.context;
    let (limit, max_chars) = match rec.thread_budgets {
        Some((limit, max_chars)) => (limit, max_chars + rec.carried_chars),
        None => {
            notes.push(
                "thread_context_limit and max_context_chars: the decision used no thread \
                 context, so they come from the current config"
                    .into(),
            );
            let limit = config
                .workspace(&d.chat_id)
                .and_then(|w| w.thread_context_limit)
                .unwrap_or(c.thread_context_limit);
            (limit, c.max_context_chars)
        }
    };
    notes.push("max_agent_output_chars is not recorded: it comes from the current config".into());
    Settings {
        thread_context_limit: limit,
        max_context_chars: max_chars,
        max_agent_output_chars: c.max_agent_output_chars,
        shared_thread_enabled: rec.thread_on,
        group_chat_history_share: rec.history_on,
        workspace_mode: d.workspace_mode.clone(),
    }
}

/// `recorded` with `o` applied (a direct message keeps its context off).
fn apply(recorded: &Settings, o: &Overrides, notes: &mut Vec<String>) -> Settings {
    let mut s = recorded.clone();
    s.thread_context_limit = o.thread_context_limit.unwrap_or(s.thread_context_limit);
    s.max_context_chars = o.max_context_chars.unwrap_or(s.max_context_chars);
    s.max_agent_output_chars = o.max_agent_output_chars.unwrap_or(s.max_agent_output_chars);
    if s.workspace_mode == "dm" {
        if o.shared_thread_enabled.is_some()
            || o.group_chat_history_share.is_some()
            || o.workspace_mode.is_some()
        {
            notes
                .push("a direct message has no thread context or pending history: kept off".into());
        }
        return s;
    }
    s.shared_thread_enabled = o.shared_thread_enabled.unwrap_or(s.shared_thread_enabled);
    s.group_chat_history_share = o
        .group_chat_history_share
        .unwrap_or(s.group_chat_history_share);
    if let Some(m) = o.workspace_mode {
        s.workspace_mode = m.as_str().into();
    }
    s
}

/// The selector's mode for a recorded workspace mode (`dm` selects as `shared`).
fn mode_of(workspace_mode: &str) -> WorkspaceMode {
    WorkspaceMode::parse(workspace_mode).unwrap_or_default()
}

/// The request as the selector knew it: a handoff through the agent's `handoff` field
/// has its turn id there.
async fn request_in_context<S>(store: &S, row: &DecisionRow) -> Result<String, StoreError>
where
    S: TurnStore + HandoffStore + ?Sized,
{
    if let Some(turn) = store.turn_of_decision(row.id).await? {
        let handoff = store.handoff(&turn.turn_id).await?;
        if handoff.is_some_and(|h| h.via == "field") {
            return Ok(turn.turn_id);
        }
    }
    Ok(row.decision.message_id.clone())
}

/// The recorded candidates `ids` as the log holds them now; the ones it no longer holds
/// are added to `purged`.
async fn by_id<S>(
    store: &S,
    ids: &[i64],
    rec: &Recorded,
    purged: &mut Vec<ExcludedItem>,
) -> Result<Vec<Candidate>, StoreError>
where
    S: EventLog + ?Sized,
{
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    let found = store.candidates_by_id(ids).await?;
    for id in ids {
        if !found.iter().any(|c| c.item_id == *id) && !purged.iter().any(|p| p.item_id == *id) {
            let (item_type, created_at) = rec.kinds.get(id).cloned().unwrap_or_default();
            purged.push(ExcludedItem {
                item_id: *id,
                item_type,
                reason: "purged".into(),
                created_at,
            });
        }
    }
    Ok(found)
}

/// Adds the `fresh` candidates not already in `candidates` and not kept out as recorded.
fn merge(candidates: &mut Vec<Candidate>, fresh: Vec<Candidate>, kept: &HashSet<i64>) {
    for c in fresh {
        if !kept.contains(&c.item_id) && !candidates.iter().any(|x| x.item_id == c.item_id) {
            candidates.push(c);
        }
    }
}

/// The request's history scope, read from its own record, and the scope's items said by
/// the decision's time.
async fn scope_said_by<S>(store: &S, row: &DecisionRow) -> Result<Vec<Candidate>, StoreError>
where
    S: EventLog + ?Sized,
{
    let d = &row.decision;
    let events = store.message_events(&d.message_id).await?;
    let Some(scope) = events
        .iter()
        .find(|e| e.bot_profile == d.bot_profile)
        .map(|e| e.history_scope.clone())
    else {
        return Ok(Vec::new());
    };
    store
        .scope_candidates_said_by(&d.bot_profile, &scope, d.created_at, selector::PENDING_READ)
        .await
}

/// The would-be selection in explain's shape, the blocks kept as recorded.
fn would_be(
    rec: &Recorded,
    thread: Selection,
    history: Selection,
    purged: Vec<ExcludedItem>,
) -> WouldBe {
    let mut selected: Vec<SelectedItem> = rec.head.clone();
    selected.extend(thread.selected.iter().map(SelectedItem::from));
    selected.extend(history.selected.iter().map(SelectedItem::from));
    selected.extend(rec.tail.iter().cloned());
    let context_chars = selected.iter().map(|s| s.chars).sum();
    let mut diagnostics = serde_json::json!({
        "thread": thread.diagnostics,
        "pending_history": history.diagnostics,
        "context_chars": context_chars,
    });
    for part in ["topic_root", "quoted_reply", "carried_summary", "media"] {
        diagnostics[part] = rec.diagnostics[part].clone();
    }
    let mut excluded: Vec<ExcludedItem> = thread
        .excluded
        .into_iter()
        .chain(history.excluded)
        .map(ExcludedItem::from)
        .collect();
    excluded.extend(purged);
    excluded.extend(rec.kept.iter().cloned());
    WouldBe {
        selected,
        excluded,
        diagnostics,
        context_chars,
    }
}
