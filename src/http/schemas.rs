//! OpenAPI schemas of bodies whose types live outside the HTTP layer (the context
//! engine's explanation report knows nothing of OpenAPI). Each mirrors its type field
//! for field under the same schema name; a test keeps the two in step.

use serde_json::Value;
use utoipa::ToSchema;

/// One selected item as explained.
#[derive(ToSchema)]
#[schema(as = SelectedItem)]
#[allow(dead_code)] // a schema only: never built
pub struct SelectedItemSchema {
    item_id: i64,
    /// `topic_root`, `human_message`, `agent_output`, `quoted_reply`, `topic_root_block`,
    /// `carried_summary` (the daily digest's summary, on the first turn after its reset).
    item_type: String,
    author_label: String,
    /// Characters injected.
    chars: usize,
    /// The first characters.
    preview: String,
    /// Cut to `max_agent_output_chars` (or the quoted-reply or carried-summary budget).
    truncated: bool,
    /// When its message was said: Unix ms, Feishu's create time (for a bot's answer, the
    /// one the send API returned). Null for the quoted reply, carried summary and topic
    /// root blocks, and in decisions recorded before items carried it.
    created_at: Option<i64>,
}

/// An excluded item as explained.
#[derive(ToSchema)]
#[schema(as = ExcludedItem)]
#[allow(dead_code)] // a schema only: never built
pub struct ExcludedItemSchema {
    item_id: i64,
    item_type: String,
    /// `limit`, `chars`, `own_output`, `same_turn_request`, `recalled`, `mode`,
    /// `other_profile`, `command`, `in_thread_context`, `topic_root_block`, `in_feed`.
    reason: String,
    /// When its message was said: Unix ms, Feishu's create time. Null in decisions
    /// recorded before items carried it.
    created_at: Option<i64>,
}

/// What became of a decision's turn.
#[derive(ToSchema)]
#[schema(as = TurnOutcome)]
#[allow(dead_code)] // a schema only: never built
pub struct TurnOutcomeSchema {
    /// `turn_<hex>` (`GET /turns/{turn_id}`).
    turn_id: String,
    /// `queued`, `running`, `succeeded`, `failed`, `cancelled`.
    state: String,
    /// Why it failed or was cancelled.
    error: Option<String>,
    /// The posted answer.
    reply_message_id: Option<String>,
    /// Characters of the agent's answer.
    output_chars: Option<usize>,
    /// The batched-feed segments it used, oldest first.
    feed_segments: Vec<FeedSegmentUsedSchema>,
    /// The questions its agent asked, in order, and who answered them when.
    asks: Vec<AskOutcomeSchema>,
}

/// A question a turn's agent asked, and its answer.
#[derive(ToSchema)]
#[schema(as = AskOutcome)]
#[allow(dead_code)] // a schema only: never built
pub struct AskOutcomeSchema {
    /// The ask's id.
    ask_id: String,
    prompt: String,
    /// `open`, `answered`, `timed_out` or `closed`.
    state: String,
    answer: Option<String>,
    /// The presser's open_id (none for a timeout).
    answered_by: Option<String>,
    /// Unix ms.
    answered_at: Option<i64>,
}

/// A batched-feed segment a turn used.
#[derive(ToSchema)]
#[schema(as = FeedSegmentUsed)]
#[allow(dead_code)] // a schema only: never built
pub struct FeedSegmentUsedSchema {
    /// `GET /feed` lists it.
    segment_id: i64,
    /// Messages packed into it.
    items: i64,
}

/// Where a handoff turn came from.
#[derive(ToSchema)]
#[schema(as = HandoffOrigin)]
#[allow(dead_code)] // a schema only: never built
pub struct HandoffOriginSchema {
    /// `invoked by <bot>'s turn <turn_id>, requested by <person>`.
    summary: String,
    /// `chain_<hex>`.
    chain_id: String,
    /// 1 for the chain's first handoff.
    hop: i64,
    /// The profile whose answer handed over.
    from_profile: String,
    /// Its turn.
    parent_turn_id: String,
    /// The open_id of the person who started the chain.
    requested_by: String,
    /// Their name, when known.
    requested_by_name: Option<String>,
    /// The profiles of the chain so far, in order.
    path: Vec<String>,
    /// `mention` or `field`.
    via: String,
}

/// One decision, explained.
#[derive(ToSchema)]
#[schema(as = Explanation)]
#[allow(dead_code)] // a schema only: never built
pub struct ExplanationSchema {
    decision_id: i64,
    profile: String,
    /// The profile's app id.
    bridge_id: String,
    root_msg_id: String,
    /// The request message.
    message_id: String,
    /// `thread_context`, `pending_history`, `thread_context+pending_history`, or `none`.
    mode: String,
    /// `shared`, `owner_only`, or `dm`.
    workspace_mode: String,
    session_key: String,
    request_text: String,
    /// Characters of injected context (thread, history, topic root, quote, carried
    /// summary).
    context_chars: usize,
    /// Characters of the whole prompt.
    prompt_chars: usize,
    /// Selected items: the quoted reply, carried summary and topic root blocks, then the
    /// thread, then the pending history, each in the order it was said (create time, then
    /// message id).
    selected: Vec<SelectedItemSchema>,
    /// Excluded items with reasons.
    excluded: Vec<ExcludedItemSchema>,
    /// Counts, budgets, which budget cut, topic-root, quote and carried-summary handling.
    #[schema(value_type = Object)]
    diagnostics: Value,
    /// Unix ms.
    created_at: i64,
    /// What became of the turn that made this decision (absent for decisions recorded
    /// before turns were persisted).
    turn: Option<TurnOutcomeSchema>,
    /// Where the turn came from when another bot's answer handed it over.
    handoff: Option<HandoffOriginSchema>,
    /// The injected context as rendered (`verbose`).
    thread_context: Option<String>,
    /// The prompt as submitted (`verbose`).
    prompt_preview: Option<String>,
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use utoipa::{
        PartialSchema,
        openapi::{RefOr, schema::Schema},
    };

    use super::*;
    use crate::context::report::{
        AskOutcome, ExcludedItem, Explanation, SelectedItem, TurnOutcome,
    };

    fn properties(schema: RefOr<Schema>) -> BTreeSet<String> {
        match schema {
            RefOr::T(Schema::Object(o)) => o.properties.keys().cloned().collect(),
            _ => panic!("not an object schema"),
        }
    }

    fn keys(v: &Value) -> BTreeSet<String> {
        v.as_object()
            .map(|o| o.keys().cloned().collect())
            .unwrap_or_default()
    }

    #[test]
    fn each_schema_names_exactly_the_fields_its_type_serialises() {
        let selected = SelectedItem {
            item_id: 1,
            item_type: "human_message".into(),
            author_label: "Alice".into(),
            chars: 2,
            preview: "hi".into(),
            truncated: false,
            created_at: Some(crate::util::UnixMs(1)),
        };
        let excluded = ExcludedItem {
            item_id: 2,
            item_type: "agent_output".into(),
            reason: "own_output".into(),
            created_at: Some(crate::util::UnixMs(1)),
        };
        let ask = AskOutcome {
            ask_id: "q1".into(),
            prompt: "Deploy?".into(),
            state: "answered".into(),
            answer: Some("yes".into()),
            answered_by: Some("ou_a".into()),
            answered_at: Some(2),
        };
        let turn = TurnOutcome {
            turn_id: "turn_1".into(),
            state: "succeeded".into(),
            error: None,
            reply_message_id: Some("om_r".into()),
            output_chars: Some(3),
            feed_segments: vec![crate::context::report::FeedSegmentUsed {
                segment_id: 1,
                items: 2,
            }],
            asks: vec![ask.clone()],
        };
        let handoff = crate::context::report::HandoffOrigin {
            summary: "invoked by planner's turn t0, requested by Alice".into(),
            chain_id: "chain_1".into(),
            hop: 1,
            from_profile: "planner".into(),
            parent_turn_id: "t0".into(),
            requested_by: "ou_alice".into(),
            requested_by_name: Some("Alice".into()),
            path: vec!["planner".into(), "coder".into()],
            via: "mention".into(),
        };
        let explanation = Explanation {
            decision_id: 1,
            profile: "planner".into(),
            bridge_id: "cli".into(),
            root_msg_id: "om_root".into(),
            message_id: "om_q".into(),
            mode: "thread_context".into(),
            workspace_mode: "shared".into(),
            session_key: "group:oc".into(),
            request_text: "q".into(),
            context_chars: 2,
            prompt_chars: 10,
            selected: vec![selected.clone()],
            excluded: vec![excluded.clone()],
            diagnostics: serde_json::json!({}),
            created_at: crate::util::UnixMs(1),
            turn: Some(turn.clone()),
            handoff: Some(handoff.clone()),
            thread_context: Some(String::new()),
            prompt_preview: Some(String::new()),
        };
        let pairs = [
            (
                serde_json::to_value(&selected),
                SelectedItemSchema::schema(),
            ),
            (
                serde_json::to_value(&excluded),
                ExcludedItemSchema::schema(),
            ),
            (serde_json::to_value(&turn), TurnOutcomeSchema::schema()),
            (serde_json::to_value(&ask), AskOutcomeSchema::schema()),
            (
                serde_json::to_value(&handoff),
                HandoffOriginSchema::schema(),
            ),
            (
                serde_json::to_value(&explanation),
                ExplanationSchema::schema(),
            ),
        ];
        for (value, schema) in pairs {
            let value = value.expect("serialises");
            assert_eq!(keys(&value), properties(schema), "{value}");
        }
    }
}
