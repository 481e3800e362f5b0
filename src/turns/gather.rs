//! Gathering a turn's context from the store (and, when needed, the Open API), then
//! handing it to the pure selector and prompt assembly.

use serde_json::json;

use std::{
    collections::{HashMap, HashSet},
    sync::Arc,
};

use super::{carry::CarryOver, job::TurnJob};
use crate::{
    config::{Config, Profile, WorkspaceMode},
    context::{
        media::Media,
        prompt::{self, PromptParts},
        report::{SelectedItem, preview},
        selector::{self, Request, Selected, Selection},
    },
    feishu_api::{FeishuClient, identity::Identities},
    media::{self, fetch::Fetcher},
    names::Names,
    store::{NewDecision, SessionRow, Store, StoreError},
    util::UnixMs,
    vocab::{Candidate, Exclusion, ItemType},
};

/// Everything the prompt of one turn is made of, with the record of why.
#[derive(Debug, Default)]
pub(super) struct Gathered {
    pub thread: Selection,
    pub history: Selection,
    pub history_up_to: Option<i64>,
    pub topic_root: Option<String>,
    /// `injected`, `delivered_before`, `is_request`, `disabled`, `unavailable`, `dm`.
    pub topic_root_status: &'static str,
    pub quoted: Option<(String, bool)>,
    /// `none`, `injected`, `truncated`, `unreadable`.
    pub quoted_status: &'static str,
    pub source_message_ids: Vec<String>,
    /// The requester's name, when known.
    pub requester: Option<String>,
    /// The daily digest's summary carried into the session's first turn after its reset.
    pub carry: CarryOver,
    /// What the turn's messages carry (images, files, bundles, docs), as fetched.
    pub media: Media,
}

impl Gathered {
    /// The mode string recorded in the decision.
    pub fn mode(&self, thread_on: bool, history_on: bool) -> String {
        match (thread_on, history_on) {
            (true, true) => "thread_context+pending_history".into(),
            (true, false) => "thread_context".into(),
            (false, true) => "pending_history".into(),
            (false, false) => "none".into(),
        }
    }

    /// The prompt.
    pub fn prompt(&self, request: &str) -> String {
        let shared = self.media.prompt_lines();
        prompt::assemble(&PromptParts {
            request,
            topic_root: self.topic_root.as_deref(),
            thread: &self.thread.selected,
            history: &self.history.selected,
            quoted: self.quoted.as_ref().map(|(t, _)| t.as_str()),
            requester: self.requester.as_deref(),
            carried: self.carry.text(),
            shared: &shared,
        })
    }

    /// The injected context as one text (what explain shows as `thread_context`).
    pub fn rendered_context(&self) -> String {
        let mut parts = Vec::new();
        if let Some((q, _)) = &self.quoted {
            parts.push(format!("quoted reply: {q}"));
        }
        if let Some(c) = self.carry.text() {
            parts.push(format!("earlier in this chat: {c}"));
        }
        if let Some(r) = &self.topic_root {
            parts.push(format!("topic root: {r}"));
        }
        for s in self.selected() {
            parts.push(format!("{}: {}", s.author_label, s.text));
        }
        for (what, text, _) in self.media.prompt_lines() {
            parts.push(format!("{what}: {text}"));
        }
        parts.join("\n")
    }

    /// Characters of everything injected besides the request.
    pub fn context_chars(&self) -> usize {
        let items: usize = self.selected().map(|s| s.text.chars().count()).sum();
        items
            + self.topic_root.as_ref().map_or(0, |r| r.chars().count())
            + self.quoted.as_ref().map_or(0, |(q, _)| q.chars().count())
            + self.carry.chars()
            + self.media.chars()
    }

    /// The selected thread items, then the selected pending history.
    pub fn selected(&self) -> impl Iterator<Item = &Selected> {
        self.thread.selected.iter().chain(&self.history.selected)
    }

    /// Selected items for the explain record: the quoted reply, carried summary and topic
    /// root blocks (no time: they stand outside the thread), then the thread, then the
    /// pending history, each in said order.
    pub fn selected_items(&self) -> Vec<SelectedItem> {
        let mut out = Vec::new();
        if let Some((q, cut)) = &self.quoted {
            out.push(SelectedItem {
                item_id: 0,
                item_type: "quoted_reply".into(),
                author_label: "quoted message".into(),
                chars: q.chars().count(),
                preview: preview(q, 80),
                truncated: *cut,
                created_at: None,
            });
        }
        out.extend(self.carry.item());
        if let Some(r) = &self.topic_root {
            out.push(SelectedItem {
                item_id: 0,
                item_type: "topic_root_block".into(),
                author_label: "topic root".into(),
                chars: r.chars().count(),
                preview: preview(r, 80),
                truncated: false,
                created_at: None,
            });
        }
        out.extend(self.selected().map(SelectedItem::from));
        out.extend(self.media.selected_items());
        out
    }

    /// The decision record of `job`'s turn in `session`: what was selected and
    /// excluded, why, and the prompt (empty when the turn is not handed to the agent).
    pub(super) fn decision(
        &self,
        job: &TurnJob,
        session: &SessionRow,
        target_id: Option<String>,
        prompt: &str,
        modes: (bool, bool),
    ) -> NewDecision {
        let mut sources = vec![job.message_id.clone()];
        for m in self
            .source_message_ids
            .iter()
            .chain(self.selected().map(|s| &s.message_id))
        {
            if !sources.contains(m) {
                sources.push(m.clone());
            }
        }
        // The same fields as the explain record's excluded items: serialized as they are.
        let mut excluded: Vec<serde_json::Value> = self
            .thread
            .excluded
            .iter()
            .chain(&self.history.excluded)
            .filter_map(|e| serde_json::to_value(e).ok())
            .collect();
        excluded.extend(self.media.excluded_items());
        let item_ids: Vec<i64> = self.selected().map(|s| s.item_id).collect();
        NewDecision {
            chat_id: job.chat_id.clone(),
            root_msg_id: job.root_msg_id.clone(),
            message_id: job.message_id.clone(),
            bridge_id: job.app_id.clone(),
            bot_profile: job.profile.clone(),
            target_id,
            workspace_mode: job
                .workspace_mode
                .map_or("dm", WorkspaceMode::as_str)
                .into(),
            mode: self.mode(modes.0, modes.1),
            session_key: session.session_key.clone(),
            session_id: session.session_id.clone(),
            request_text: job.request_text.clone(),
            thread_context: self.rendered_context(),
            selected_item_ids_json: json_text(&item_ids),
            selected_json: json_text(&self.selected_items()),
            excluded_json: json_text(&excluded),
            prompt_preview: prompt.to_string(),
            diagnostics_json: self.diagnostics().to_string(),
            source_message_ids: sources,
            created_at: UnixMs::now(),
        }
    }

    /// Diagnostics for the decision.
    pub fn diagnostics(&self) -> serde_json::Value {
        json!({
            "thread": self.thread.diagnostics,
            "pending_history": self.history.diagnostics,
            "topic_root": self.topic_root_status,
            "quoted_reply": self.quoted_status,
            "carried_summary": self.carry.diagnostics(),
            "context_chars": self.context_chars(),
            "media": self.media.diagnostics(),
        })
    }
}

/// Reads a turn's context: the store first, the Open API for messages it never saw.
pub(super) struct Gatherer {
    config: Arc<Config>,
    store: Arc<dyn Store>,
    clients: HashMap<String, Arc<FeishuClient>>,
    identities: Arc<Identities>,
    names: Option<Arc<Names>>,
}

impl Gatherer {
    /// A gatherer over the app's parts.
    pub(super) fn new(
        config: Arc<Config>,
        store: Arc<dyn Store>,
        clients: HashMap<String, Arc<FeishuClient>>,
        identities: Arc<Identities>,
    ) -> Self {
        Self {
            config,
            store,
            clients,
            identities,
            names: None,
        }
    }

    /// The gatherer labelling senders by their names.
    pub(super) fn with_names(mut self, names: Arc<Names>) -> Self {
        self.names = Some(names);
        self
    }

    /// Senders shown by their open_id get their names, where known (else they are
    /// queued for the background lookup), and so does the requester.
    async fn name(&self, job: &TurnJob, g: &mut Gathered) {
        g.requester = job.sender_name.clone();
        let Some(names) = &self.names else {
            return;
        };
        let mut requester = job.sender_open_id.clone();
        let mut labels: Vec<&mut String> = g
            .thread
            .selected
            .iter_mut()
            .chain(&mut g.history.selected)
            .map(|s| &mut s.author_label)
            .collect();
        labels.push(&mut requester);
        names.relabel_users(&job.profile, labels).await;
        if requester != job.sender_open_id {
            g.requester = Some(requester);
        }
    }

    /// A per-profile context setting (`false` for a profile no longer configured).
    pub(super) fn profile_flag(
        &self,
        profile: &str,
        flag: impl Fn(&Config, &Profile) -> bool,
    ) -> bool {
        self.config
            .profile(profile)
            .is_some_and(|p| flag(&self.config, p))
    }

    fn thread_limit(&self, chat_id: &str) -> usize {
        self.config
            .workspace(chat_id)
            .and_then(|w| w.thread_context_limit)
            .unwrap_or(self.config.context.thread_context_limit)
    }

    /// Reads and selects everything the turn's prompt is made of.
    pub(super) async fn gather(
        &self,
        job: &TurnJob,
        delivered: bool,
        (thread_on, history_on): (bool, bool),
        in_feed: &HashSet<&str>,
    ) -> Result<Gathered, StoreError> {
        let mut g = Gathered {
            topic_root_status: "disabled",
            quoted_status: "none",
            ..Gathered::default()
        };
        g.carry = self.carry(job).await;
        let limit = self.thread_limit(&job.chat_id);
        let req = Request {
            bridge_id: &job.app_id,
            profile: &job.profile,
            mode: job.workspace_mode.unwrap_or(WorkspaceMode::Shared),
            message_id: job.request_in_context(),
            is_command: false,
            limit,
            // The carried summary counts against the budget.
            max_chars: (self.config.context.max_context_chars).saturating_sub(g.carry.chars()),
            max_agent_output_chars: self.config.context.max_agent_output_chars,
        };

        // Topic root: once per session, in a group thread, unless the root is the request.
        if job.is_dm {
            g.topic_root_status = "dm";
        } else if self.profile_flag(&job.profile, Config::topic_root_enabled) {
            g.topic_root_status = if job.message_id == job.root_msg_id {
                "is_request"
            } else if delivered {
                "delivered_before"
            } else {
                match self.root_text(job).await? {
                    Some(text) => {
                        g.topic_root = Some(text);
                        g.source_message_ids.push(job.root_msg_id.clone());
                        "injected"
                    }
                    None => "unavailable",
                }
            };
        }

        if thread_on {
            let window = selector::thread_read_window(limit);
            let rows = self.store.thread_candidates(job.thread(), window).await?;
            let (fed, rows) = carried_by_feed(rows, in_feed);
            let injected = g.topic_root.is_some();
            let (in_block, candidates): (Vec<Candidate>, Vec<Candidate>) =
                rows.into_iter().partition(|c| {
                    injected
                        && c.item_type == ItemType::TopicRoot
                        && c.message_id == job.root_msg_id
                });
            g.thread = selector::select_thread(&req, candidates);
            // The root already has its own block: not again as a thread item.
            g.thread.excluded.extend(
                in_block
                    .iter()
                    .map(|c| selector::exclusion(c, Exclusion::TopicRootBlock)),
            );
            g.thread.excluded.extend(fed);
        }
        if history_on {
            let rows = self
                .store
                .pending_candidates(&job.profile, &job.history_scope, selector::PENDING_READ)
                .await?;
            g.history_up_to = rows.iter().map(|r| r.event_id).max();
            let (fed, rows) = carried_by_feed(rows, in_feed);
            let in_thread: Vec<i64> = g.thread.selected.iter().map(|s| s.item_id).collect();
            g.history = selector::select_pending(&req, rows, &in_thread);
            g.history.excluded.extend(fed);
        }
        self.name(job, &mut g).await;
        Ok(g)
    }

    /// Fetches what the request, the message it quotes and the selected items' messages
    /// carry (in that order, the newest items' first), within the `[media]` budgets; what
    /// cannot be had is recorded with its reason and the turn goes on.
    pub(super) async fn media(&self, job: &TurnJob, g: &mut Gathered) {
        if !self.config.media.enabled {
            return;
        }
        let Some(client) = self.clients.get(&job.profile).filter(|c| c.can_send()) else {
            return;
        };
        let mut said: Vec<&Selected> = g.selected().collect();
        said.sort_by_key(|s| std::cmp::Reverse(s.created_at));
        let mut ids = vec![job.message_id.clone()];
        // The message the request quotes ("what is in this screenshot?") comes next.
        if let Some(quoted) = job.quoted_message_id().filter(|_| g.quoted.is_some()) {
            ids.push(quoted.to_string());
        }
        for s in said {
            if !ids.contains(&s.message_id) {
                ids.push(s.message_id.clone());
            }
        }
        let refs = match media::refs_of(&*self.store, &job.profile, &ids).await {
            Ok(refs) => refs,
            Err(e) => {
                tracing::warn!(turn_id = %job.turn_id, error = %e, "media references not read; the turn goes on without them");
                return;
            }
        };
        if refs.is_empty() {
            return;
        }
        let bot = self.identities.get(&job.profile);
        let fetcher = Fetcher {
            client,
            config: &self.config.media,
            names: &*self.store,
            profile: &job.profile,
            bot_open_id: bot.as_deref(),
        };
        g.media = fetcher.fetch(&refs).await;
    }

    /// The daily digest's summary for the session's first turn after the digest reset it.
    async fn carry(&self, job: &TurnJob) -> CarryOver {
        if !self.config.digest.carry_over {
            return CarryOver::off();
        }
        let max = self.config.context.max_context_chars;
        CarryOver::find(&*self.store, &job.profile, &job.session_key, max).await
    }

    /// The quoted message, cut to its budget; `Err(())` when it cannot be read.
    pub(super) async fn quoted(
        &self,
        job: &TurnJob,
        g: &mut Gathered,
    ) -> Result<Result<(), ()>, StoreError> {
        let Some(parent) = job.quoted_message_id() else {
            return Ok(Ok(()));
        };
        let text = match self.store.message_text(parent).await? {
            Some((text, _)) => Some(text),
            None => self.fetch_text(&job.profile, parent).await,
        };
        let Some(text) = text else {
            g.quoted_status = "unreadable";
            return Ok(Err(()));
        };
        let (cut, truncated) =
            selector::truncate(&text, self.config.context.quoted_reply_max_chars);
        g.quoted_status = if truncated { "truncated" } else { "injected" };
        g.quoted = Some((cut, truncated));
        g.source_message_ids.push(parent.to_string());
        Ok(Ok(()))
    }

    async fn root_text(&self, job: &TurnJob) -> Result<Option<String>, StoreError> {
        if let Some((text, _)) = self.store.topic_root(job.thread()).await? {
            return Ok(Some(text));
        }
        Ok(self.fetch_text(&job.profile, &job.root_msg_id).await)
    }

    async fn fetch_text(&self, profile: &str, message_id: &str) -> Option<String> {
        let client = self.clients.get(profile)?;
        let bot = self.identities.get(profile);
        match client.get_message(message_id, bot.as_deref()).await {
            Ok(m) => m.map(|m| m.text),
            Err(e) => {
                tracing::warn!(profile, message_id, error = %e, "could not read a message through the Open API");
                None
            }
        }
    }
}

/// Splits off the candidates a batched-feed segment of the same turn carries: one
/// message reaches the agent once, and the feed (given to the session already, or with
/// this turn) is the block that carries it.
fn carried_by_feed(
    rows: Vec<Candidate>,
    in_feed: &HashSet<&str>,
) -> (Vec<selector::Excluded>, Vec<Candidate>) {
    if in_feed.is_empty() {
        return (Vec::new(), rows);
    }
    let (fed, kept): (Vec<Candidate>, Vec<Candidate>) = rows
        .into_iter()
        .partition(|c| !c.recalled && in_feed.contains(c.message_id.as_str()));
    let fed = fed
        .iter()
        .map(|c| selector::exclusion(c, Exclusion::InFeed))
        .collect();
    (fed, kept)
}

/// Row values serialised as JSON text (plain data: serialising cannot fail).
fn json_text<T: serde::Serialize + ?Sized>(value: &T) -> String {
    serde_json::to_string(value).unwrap_or_default()
}
