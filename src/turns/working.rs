//! The "working" reaction: while a turn runs, its request message shows an emoji
//! reaction of the bot's (`agent.working_reaction`, `Typing` by default), taken off
//! when the turn ends, however it ends.
//!
//! It is decoration, so it never fails a turn and delays it by at most [`ADD_WAIT`]:
//! the add is one call made only when the app's budget has room to spare
//! (`Urgency::Intermediate`: never retried, skipped under load), in a task of its own
//! that the turn waits for only that long. Taking an added reaction off is a required
//! call (retried), made by the same task once the turn's [`ReactionHandle`] is given
//! back or dropped. The reaction's id is recorded on the turn, so that one a crash left
//! behind is removed by whoever ends the turn after it (recovery at the next start, or
//! another replica taking it over), and one whose removal did not get through is
//! removed at the next start ([`Working::sweep`]). The tasks are tracked: a shutdown
//! waits for them ([`Working::finish`]).
//!
//! A profile whose app lacks the scope (Feishu's 99991672), or whose emoji Feishu does
//! not know (231001), stops trying for [`REFUSAL_STANDS`] (or until a restart): one
//! warning in the log, and `/status` shows why. Dry-run profiles (and profiles without
//! an app secret) never react.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
    time::Duration,
};

use serde::Serialize;
use tokio::sync::oneshot;
use tokio_util::task::TaskTracker;
use utoipa::ToSchema;

use super::job::TurnJob;
use crate::{
    config::Config,
    feishu_api::{
        FeishuClient, OpenApiError, Urgency,
        codes::MISSING_SCOPE,
        reactions::{REACTION_GONE, REACTIONS_SCOPE, UNKNOWN_EMOJI},
    },
    store::{TurnRow, TurnStore},
    util::{Clock, UnixMs},
};

/// The longest a turn waits for its reaction to be added before it goes on (the add
/// goes on beside it).
pub const ADD_WAIT: Duration = Duration::from_secs(1);

/// How long a refusal (missing scope, unknown emoji) keeps a profile from trying again.
pub const REFUSAL_STANDS: Duration = Duration::from_secs(3600);

/// Ended turns whose reaction is still recorded, removed at one start (the rest at the
/// next).
const SWEEP_LIMIT: i64 = 200;

/// Why a profile stopped reacting.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Refused {
    /// The app lacks the scope (99991672).
    MissingScope,
    /// Feishu does not know the emoji (231001).
    UnknownEmoji,
}

impl Refused {
    fn as_str(self) -> &'static str {
        match self {
            Self::MissingScope => "missing_scope",
            Self::UnknownEmoji => "unknown_emoji",
        }
    }
}

/// One turn's reaction, held while the turn runs: giving it back to [`Working::end`],
/// or dropping it, takes the reaction off.
#[derive(Debug)]
pub struct ReactionHandle {
    /// Closed when the turn ended: the task holding the reaction then removes it.
    _ended: oneshot::Sender<()>,
}

/// Where a reaction is: the turn's profile, request message and id.
#[derive(Debug, Clone)]
struct Target {
    profile: String,
    message_id: String,
    turn_id: String,
}

/// `working_reaction` of a profile in `/status`.
#[derive(Debug, Serialize, ToSchema)]
pub struct WorkingReactionStatus {
    /// `on`; `off` (`agent.working_reaction = ""`, a dry run, or no app secret);
    /// `missing_scope` (Feishu refused it for a scope the app lacks) or `unknown_emoji`
    /// (Feishu does not know the emoji): not tried again until an hour after `since`, or
    /// a restart.
    pub state: &'static str,
    /// The emoji type it reacts with (null when off).
    pub emoji: Option<String>,
    /// The scope to add in the developer console (with `missing_scope`).
    pub scope: Option<&'static str>,
    /// Unix ms Feishu refused it.
    pub since: Option<i64>,
}

/// The working reaction of every profile.
pub struct Working {
    config: Arc<Config>,
    clients: HashMap<String, Arc<FeishuClient>>,
    store: Arc<dyn TurnStore>,
    clock: Arc<dyn Clock>,
    /// Profiles Feishu refused, with why and when.
    refused: Mutex<HashMap<String, (Refused, UnixMs)>>,
    /// Every reaction's task, waited for at shutdown.
    tasks: TaskTracker,
}

impl std::fmt::Debug for Working {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Working")
    }
}

impl Working {
    /// The working reaction over the app's parts.
    pub fn new(
        config: Arc<Config>,
        clients: HashMap<String, Arc<FeishuClient>>,
        store: Arc<dyn TurnStore>,
        clock: Arc<dyn Clock>,
    ) -> Self {
        Self {
            config,
            clients,
            store,
            clock,
            refused: Mutex::default(),
            tasks: TaskTracker::new(),
        }
    }

    /// The profile's emoji and client, when it reacts at all (configured, not a dry
    /// run, able to send).
    fn configured(&self, profile: &str) -> Option<(String, Arc<FeishuClient>)> {
        let p = self.config.profile(profile).filter(|p| !p.dry_run)?;
        let emoji = Some(p.agent.working_reaction.clone()).filter(|e| !e.is_empty())?;
        let client = self.clients.get(profile).filter(|c| c.can_send())?;
        Some((emoji, client.clone()))
    }

    /// The client that can remove a reaction of `profile` (whatever its emoji now).
    fn remover(&self, profile: &str) -> Option<Arc<FeishuClient>> {
        self.clients.get(profile).filter(|c| c.can_send()).cloned()
    }

    /// The refusal of `profile` that still stands.
    fn refusal(&self, profile: &str) -> Option<(Refused, UnixMs)> {
        let refused = self.refused.lock().unwrap_or_else(|p| p.into_inner());
        let stands = i64::try_from(REFUSAL_STANDS.as_millis()).unwrap_or(i64::MAX);
        let now = self.clock.now();
        refused
            .get(profile)
            .copied()
            .filter(|(_, since)| now.0.saturating_sub(since.0) < stands)
    }

    /// Shows that the turn's request is being worked on: adds the reaction and records
    /// it on the turn, waiting at most [`ADD_WAIT`]. `None` when the profile does not
    /// react (off, a dry run, refused).
    pub async fn begin(self: &Arc<Self>, job: &TurnJob) -> Option<ReactionHandle> {
        let (emoji, client) = self.configured(&job.profile)?;
        if self.refusal(&job.profile).is_some() {
            return None;
        }
        let (ended, on_end) = oneshot::channel();
        let (ready, on_ready) = oneshot::channel();
        let target = Target {
            profile: job.profile.clone(),
            message_id: job.message_id.clone(),
            turn_id: job.turn_id.clone(),
        };
        let this = self.clone();
        self.tasks.spawn(async move {
            this.hold(&client, &emoji, &target, ready, on_end).await;
        });
        // Answered (added or not), or still on its way: the turn goes on either way.
        let _ = tokio::time::timeout(ADD_WAIT, on_ready).await;
        Some(ReactionHandle { _ended: ended })
    }

    /// The turn ended: its reaction (if any) is taken off, beside whatever comes next.
    pub fn end(&self, handle: Option<ReactionHandle>) {
        drop(handle);
    }

    /// One turn's reaction from add to removal: added, recorded on the turn, `ready`
    /// told; then, once the turn ended (its handle gone), removed.
    async fn hold(
        &self,
        client: &FeishuClient,
        emoji: &str,
        t: &Target,
        ready: oneshot::Sender<()>,
        ended: oneshot::Receiver<()>,
    ) {
        let added = client
            .add_reaction(&t.message_id, emoji, Urgency::Intermediate)
            .await;
        let reaction_id = match added {
            Ok(id) => id,
            Err(e) => return self.not_added(t, &e),
        };
        self.granted(&t.profile);
        if let Err(e) = self
            .store
            .record_turn_reaction(&t.turn_id, &reaction_id)
            .await
        {
            // Removed below all the same; only a crash before that would leave it.
            tracing::warn!(turn_id = %t.turn_id, error = %e, "working reaction not recorded on its turn");
        }
        let _ = ready.send(());
        // Either the turn gave its handle back or dropped it: it is over here.
        let _ = ended.await;
        self.remove(client, t, &reaction_id).await;
    }

    /// Takes a reaction off and forgets it on the turn. A failure that may pass (no
    /// connection, no token, rate limits past the retries) keeps it recorded, for the
    /// next start; a refusal is final.
    async fn remove(&self, client: &FeishuClient, t: &Target, reaction_id: &str) {
        match client.delete_reaction(&t.message_id, reaction_id).await {
            Ok(()) => {}
            Err(e) if e.is(&REACTION_GONE) => {
                tracing::debug!(turn_id = %t.turn_id, error = %e, "working reaction already gone");
            }
            Err(e) if passing(&e) => {
                tracing::warn!(turn_id = %t.turn_id, error = %e, "working reaction not removed; the next start tries again");
                return;
            }
            Err(e) => {
                tracing::warn!(profile = %t.profile, turn_id = %t.turn_id, error = %e, "working reaction not removed: Feishu refused it");
            }
        }
        if let Err(e) = self
            .store
            .clear_turn_reaction(&t.turn_id, reaction_id)
            .await
        {
            tracing::warn!(turn_id = %t.turn_id, error = %e, "removed working reaction still recorded; the next start removes it again");
        }
    }

    /// Why an add failed, told once where it stops the profile trying.
    fn not_added(&self, t: &Target, e: &OpenApiError) {
        let why = if e.is(&MISSING_SCOPE) {
            Refused::MissingScope
        } else if e.is(&UNKNOWN_EMOJI) {
            Refused::UnknownEmoji
        } else {
            // Under load, the message gone, Feishu unreachable: this turn goes without.
            tracing::debug!(turn_id = %t.turn_id, error = %e, "working reaction not added");
            return;
        };
        let now = self.clock.now();
        let mut refused = self.refused.lock().unwrap_or_else(|p| p.into_inner());
        let before = refused.insert(t.profile.clone(), (why, now));
        if before.is_none_or(|(was, _)| was != why) {
            match why {
                Refused::MissingScope => tracing::warn!(
                    profile = %t.profile,
                    scope = REACTIONS_SCOPE,
                    "Feishu refused the working reaction for a missing scope: requests are not marked while their turns run; add the scope to the app in the developer console"
                ),
                Refused::UnknownEmoji => tracing::warn!(
                    profile = %t.profile,
                    "Feishu does not know the emoji of agent.working_reaction: requests are not marked while their turns run"
                ),
            }
        }
    }

    /// An add went through: a refusal of the profile is over.
    fn granted(&self, profile: &str) {
        let mut refused = self.refused.lock().unwrap_or_else(|p| p.into_inner());
        if refused.remove(profile).is_some() {
            tracing::info!(profile, "the working reaction is accepted again");
        }
    }

    /// Removes the reaction recorded on a turn that was ended by someone other than the
    /// runner that added it (recovery after a restart, a takeover), beside the caller.
    pub(super) fn remove_recorded(self: &Arc<Self>, row: &TurnRow) {
        let Some(reaction_id) = row.working_reaction_id.clone() else {
            return;
        };
        let Some(client) = self.remover(&row.profile) else {
            return;
        };
        let target = Target {
            profile: row.profile.clone(),
            message_id: row.message_id.clone(),
            turn_id: row.turn_id.clone(),
        };
        let this = self.clone();
        self.tasks.spawn(async move {
            this.remove(&client, &target, &reaction_id).await;
        });
    }

    /// At start: removes the reactions ended turns still have recorded (a removal that
    /// did not get through, or a shutdown that did not wait for it).
    pub(super) async fn sweep(self: &Arc<Self>) {
        match self.store.ended_turn_reactions(SWEEP_LIMIT).await {
            Ok(rows) => {
                for row in &rows {
                    self.remove_recorded(row);
                }
            }
            Err(e) => {
                tracing::warn!(error = %e, "ended turns' working reactions not read; the next start removes them");
            }
        }
    }

    /// At shutdown, once no turn runs: waits (at most `grace`) for the reactions being
    /// removed. What is left stays recorded, and the next start removes it.
    pub async fn finish(&self, grace: Duration) {
        self.tasks.close();
        if tokio::time::timeout(grace, self.tasks.wait())
            .await
            .is_err()
        {
            tracing::warn!(
                left = self.tasks.len(),
                "working reactions not removed within the grace period; the next start removes them"
            );
        }
    }

    /// What `/status` shows for `profile`.
    pub fn status(&self, profile: &str) -> WorkingReactionStatus {
        let Some((emoji, _)) = self.configured(profile) else {
            return WorkingReactionStatus {
                state: "off",
                emoji: None,
                scope: None,
                since: None,
            };
        };
        let refusal = self.refusal(profile);
        WorkingReactionStatus {
            state: refusal.map_or("on", |(why, _)| why.as_str()),
            emoji: Some(emoji),
            scope: refusal
                .filter(|(why, _)| *why == Refused::MissingScope)
                .map(|_| REACTIONS_SCOPE),
            since: refusal.map(|(_, since)| since.millis()),
        }
    }
}

/// Whether a failed removal may succeed later: no answer from Feishu (transport, a
/// gateway's 5xx, no token) or rate limits that outlasted the retries.
fn passing(e: &OpenApiError) -> bool {
    e.code().is_none() || matches!(e, OpenApiError::RateLimited { .. })
}
