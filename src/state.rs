//! The application state: what every request handler and background task shares.
//!
//! Built by [`crate::app::bridge`], read by the HTTP layer (as the axum state); it
//! depends on neither.

use std::{collections::HashMap, ops::Deref, sync::Arc};

use tokio::{sync::broadcast, time::Instant};

use crate::{
    agent::{Agent, PendingCallbacks},
    config::{Config, Profile},
    digest::Digest,
    feed::Feed,
    feishu_api::{ApiShare, FeishuClient, identity::Identities},
    inbox::{Committer, Processed, press::Presses},
    longconn::status::Connections,
    protocol::{Credentials, crypto::AesKey},
    store::Store,
    telemetry::Metrics,
    turns::{TurnDone, queue::SessionQueues},
    util::Clock,
};

/// One profile's callback credentials, with the AES key derived once at start.
#[derive(Debug)]
pub struct ProfileKeys {
    profile: Profile,
    aes: Option<AesKey>,
}

impl ProfileKeys {
    pub(crate) fn new(profile: Profile) -> Self {
        let aes = profile.encrypt_key().map(AesKey::derive);
        Self { profile, aes }
    }

    /// What authenticates this profile's event callbacks.
    pub fn credentials(&self) -> Credentials<'_> {
        Credentials {
            encrypt: self.profile.encrypt_key().zip(self.aes.as_ref()),
            verification_token: self.profile.verification_token(),
        }
    }

    /// The AES key derived from the Encrypt Key, when there is one.
    pub fn aes(&self) -> Option<&AesKey> {
        self.aes.as_ref()
    }

    /// The Verification Token.
    pub fn verification_token(&self) -> &str {
        self.profile.verification_token()
    }
}

/// Everything a request handler or worker needs.
#[derive(Debug)]
pub struct App {
    /// Validated configuration.
    pub config: Arc<Config>,
    /// Profiles by URL name.
    pub profiles: HashMap<String, ProfileKeys>,
    /// The database.
    pub store: Arc<dyn Store>,
    /// The group committer on the webhook path.
    pub committer: Committer,
    /// This instance's metrics.
    pub metrics: Metrics,
    /// Process start.
    pub started: Instant,
    /// Worker outcomes, for observers.
    pub processed: broadcast::Sender<Processed>,
    /// Each profile's own bot identity.
    pub identities: Arc<Identities>,
    /// Per-session serial execution.
    pub queues: SessionQueues,
    /// Each profile's Open API client.
    pub clients: HashMap<String, Arc<FeishuClient>>,
    /// How the replicas split each app's Open API limits.
    pub api_share: Arc<ApiShare>,
    /// Finished turns, for observers.
    pub turns_done: broadcast::Sender<TurnDone>,
    /// Events stored for running turns, for observers (they read the turn's events).
    pub turn_events: broadcast::Sender<crate::agent::events::TurnEventNote>,
    /// Turns waiting for an agent's signed callback.
    pub callbacks: Arc<PendingCallbacks>,
    /// Card presses being stored and acted on, which can outlast their answer; the
    /// shutdown waits for them before it stops the committers.
    pub background: tokio_util::task::TaskTracker,
    /// What each long connection is doing.
    pub connections: Arc<Connections>,
    /// Each profile's agent backend.
    pub agents: HashMap<String, Arc<dyn Agent>>,
    /// The batched feed.
    pub feed: Arc<Feed>,
    /// The daily digest.
    pub digest: Arc<Digest>,
    /// Display names of senders and chats.
    pub names: Arc<crate::names::Names>,
    /// The reaction on a running turn's request.
    pub working: Arc<crate::turns::Working>,
    /// Where timed work reads the time.
    pub clock: Arc<dyn Clock>,
    /// Delivers the answers of agents' questions.
    pub answers: Arc<crate::agent::answer::AnswerSender>,
}

impl App {
    /// What storing and answering card presses needs.
    pub fn presses(&self) -> Presses {
        Presses {
            committer: self.committer.clone(),
            store: self.store.clone(),
            config: self.config.clone(),
            queues: self.queues.clone(),
            background: self.background.clone(),
            notes: self.turn_events.clone(),
            answers: self.answers.clone(),
        }
    }
}

impl std::fmt::Debug for dyn Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Store({})", self.backend().as_str())
    }
}

/// Cheap-to-clone handle on the [`App`]; the axum state.
#[derive(Debug, Clone)]
pub struct AppState(pub Arc<App>);

impl Deref for AppState {
    type Target = App;
    fn deref(&self) -> &App {
        &self.0
    }
}
