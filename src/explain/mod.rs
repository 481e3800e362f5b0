//! Loading an explanation, beside the context engine that made the decision: the
//! store's decision row turned into the [`crate::context::report::Explanation`] that
//! `GET /explain/{root}` and the `explain` CLI show. Shared, so the server and the CLI
//! (which reads the database directly and works while the server is down) print the
//! same thing. What-if explain (`what_if`) re-runs a decision's selection under other
//! settings: `recorded` reads what the decision holds, `what_if` selects again through
//! the same selector, `diff` compares the two; `shape` is the answer's shape.

mod diff;
mod overrides;
mod recorded;
mod shape;
mod what_if;

pub use diff::render_what_if;
pub use overrides::Overrides;
pub use shape::{Diff, Settings, Trimmed, WhatIf, WouldBe};
pub use what_if::what_if;

use crate::{
    context::report::{
        AskOutcome, ExcludedItem, Explanation, FeedSegmentUsed, HandoffOrigin, SelectedItem,
        TurnOutcome,
    },
    redact::echo,
    store::{
        AskStore, DecisionRow, DecisionStore, FeedStore, HandoffRow, HandoffStore, StoreError,
        TurnState, TurnStore,
    },
};

/// Which decision to explain.
#[derive(Debug, Clone, Default)]
pub struct Query<'a> {
    pub profile: &'a str,
    pub root_msg_id: &'a str,
    /// A specific request message (its latest decision).
    pub message_id: Option<&'a str>,
    /// A specific decision.
    pub decision_id: Option<i64>,
    /// Include the thread context and the prompt.
    pub verbose: bool,
}

impl Query<'_> {
    /// What to say when no decision matches.
    pub fn not_found(&self) -> String {
        format!(
            "no context decision for root {} and profile {}{}",
            echo(self.root_msg_id),
            echo(self.profile),
            self.message_id
                .map(|m| format!(" and message {}", echo(m)))
                .unwrap_or_default()
        )
    }
}

/// Finds and explains a decision; `None` when there is none.
pub async fn load<S>(store: &S, q: &Query<'_>) -> Result<Option<Explanation>, StoreError>
where
    S: DecisionStore + TurnStore + FeedStore + AskStore + HandoffStore + ?Sized,
{
    let Some(row) = find(store, q).await? else {
        return Ok(None);
    };
    let turn = store.turn_of_decision(row.id).await?;
    let (feed, asks, handoff) = match &turn {
        Some(t) => (
            store.read_by(&t.turn_id).await?,
            store.turn_asks(&t.turn_id).await?,
            store.handoff(&t.turn_id).await?,
        ),
        None => (Vec::new(), Vec::new(), None),
    };
    let mut e = explain(row, q.verbose);
    e.handoff = handoff.map(origin);
    e.turn = turn.map(|t| TurnOutcome {
        asks: asks
            .into_iter()
            .map(|a| AskOutcome {
                state: a.state(t.state == TurnState::Running).to_string(),
                answered_at: a.answered_at.map(|at| at.millis()),
                ask_id: a.ask_id,
                prompt: a.prompt,
                answer: a.answer,
                answered_by: a.answered_by,
            })
            .collect(),
        feed_segments: feed
            .iter()
            .map(|s| FeedSegmentUsed {
                segment_id: s.id,
                items: s.items,
            })
            .collect(),
        output_chars: t.output.as_ref().map(|o| o.chars().count()),
        turn_id: t.turn_id,
        state: t.state.to_string(),
        error: t.error,
        reply_message_id: t.reply_message_id,
    });
    Ok(Some(e))
}

/// The decision `q` names; `None` when there is none.
pub async fn find<S>(store: &S, q: &Query<'_>) -> Result<Option<DecisionRow>, StoreError>
where
    S: DecisionStore + ?Sized,
{
    match q.decision_id {
        Some(id) => Ok(store.decision(id).await?.filter(|d| {
            d.decision.bot_profile == q.profile && d.decision.root_msg_id == q.root_msg_id
        })),
        None => {
            store
                .latest_decision(q.profile, q.root_msg_id, q.message_id)
                .await
        }
    }
}

/// A handoff's record as the origin of its turn.
fn origin(h: HandoffRow) -> HandoffOrigin {
    let person = h.root_name.as_deref().unwrap_or(&h.root_open_id);
    HandoffOrigin {
        summary: format!(
            "invoked by {}'s turn {}, requested by {person}",
            h.from_profile, h.parent_turn_id
        ),
        chain_id: h.chain_id,
        hop: h.hop,
        from_profile: h.from_profile,
        parent_turn_id: h.parent_turn_id,
        requested_by: h.root_open_id,
        requested_by_name: h.root_name,
        path: h.path.split('>').map(str::to_string).collect(),
        via: h.via,
    }
}

/// One row, explained.
pub fn explain(row: DecisionRow, verbose: bool) -> Explanation {
    let r = row.decision;
    let selected: Vec<SelectedItem> = serde_json::from_str(&r.selected_json).unwrap_or_default();
    let excluded: Vec<ExcludedItem> = serde_json::from_str(&r.excluded_json).unwrap_or_default();
    let diagnostics: serde_json::Value =
        serde_json::from_str(&r.diagnostics_json).unwrap_or_default();
    let context_chars = diagnostics["context_chars"].as_u64().unwrap_or_default() as usize;
    Explanation {
        decision_id: row.id,
        profile: r.bot_profile,
        bridge_id: r.bridge_id,
        root_msg_id: r.root_msg_id,
        message_id: r.message_id,
        mode: r.mode,
        workspace_mode: r.workspace_mode,
        session_key: r.session_key,
        request_text: r.request_text,
        context_chars,
        prompt_chars: r.prompt_preview.chars().count(),
        selected,
        excluded,
        diagnostics,
        created_at: r.created_at,
        turn: None,
        handoff: None,
        thread_context: verbose.then_some(r.thread_context),
        prompt_preview: verbose.then_some(r.prompt_preview),
    }
}
