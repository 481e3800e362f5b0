//! The shape of a what-if answer (`POST /explain/{root}/what-if`, `explain --what-if
//! --json`): the settings, the would-be selection, and its diff against the decision.

use serde::Serialize;
use utoipa::ToSchema;

use crate::context::report::{ExcludedItem, SelectedItem};

/// The settings a selection is made under.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToSchema)]
pub struct Settings {
    pub thread_context_limit: usize,
    pub max_context_chars: usize,
    pub max_agent_output_chars: usize,
    pub shared_thread_enabled: bool,
    pub group_chat_history_share: bool,
    /// `shared`, `owner_only`, or `dm` (a direct message has no thread context).
    pub workspace_mode: String,
}

impl Settings {
    /// Every setting by its configuration key, as text: `(key, this one's, other's)`.
    pub fn beside(&self, other: &Settings) -> [(&'static str, String, String); 6] {
        let row = |key, f: fn(&Settings) -> String| (key, f(self), f(other));
        [
            row("thread_context_limit", |s| {
                s.thread_context_limit.to_string()
            }),
            row("max_context_chars", |s| s.max_context_chars.to_string()),
            row("max_agent_output_chars", |s| {
                s.max_agent_output_chars.to_string()
            }),
            row("shared_thread_enabled", |s| {
                s.shared_thread_enabled.to_string()
            }),
            row("group_chat_history_share", |s| {
                s.group_chat_history_share.to_string()
            }),
            row("workspace_mode", |s| s.workspace_mode.clone()),
        ]
    }
}

/// The selection the settings would have made.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct WouldBe {
    /// Selected, as explain lists them: blocks, the thread, the pending history, media.
    #[schema(value_type = Vec<Object>)]
    pub selected: Vec<SelectedItem>,
    /// Not selected, with reasons (`purged` for an item no longer in the event log).
    #[schema(value_type = Vec<Object>)]
    pub excluded: Vec<ExcludedItem>,
    /// The selectors' counts and budgets, beside the recorded block statuses.
    #[schema(value_type = Object)]
    pub diagnostics: serde_json::Value,
    /// Characters injected besides the request.
    pub context_chars: usize,
}

/// A decision's selection made again under other settings.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct WhatIf {
    pub decision_id: i64,
    pub profile: String,
    pub root_msg_id: String,
    /// The request message.
    pub message_id: String,
    /// The settings the decision was made under.
    pub recorded: Settings,
    /// The settings used now: the recorded ones with the overrides applied.
    pub settings: Settings,
    /// The would-be selection.
    pub selection: WouldBe,
    /// The would-be selection against the real one.
    pub diff: Diff,
    /// Where an input could not be had as it was (taken from the config, scrubbed by a
    /// recall, approximated).
    pub notes: Vec<String>,
}

/// An item selected both times but injected differently.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToSchema)]
pub struct Trimmed {
    pub item_id: i64,
    pub item_type: String,
    /// Characters injected by the decision.
    pub chars_before: usize,
    /// Characters the settings would inject.
    pub chars_after: usize,
    pub truncated_before: bool,
    pub truncated_after: bool,
}

/// What the settings change about the thread and pending-history items.
#[derive(Debug, Clone, Default, Serialize, ToSchema)]
pub struct Diff {
    /// Items the settings would add.
    #[schema(value_type = Vec<Object>)]
    pub added: Vec<SelectedItem>,
    /// Items the decision selected that the settings would leave out, with the reason
    /// they would now be left out (`recalled`, `purged` among them).
    #[schema(value_type = Vec<Object>)]
    pub dropped: Vec<ExcludedItem>,
    /// Items selected both times with a different length or truncation.
    pub trimmed: Vec<Trimmed>,
    /// Nothing added, dropped or trimmed.
    pub unchanged: bool,
}
