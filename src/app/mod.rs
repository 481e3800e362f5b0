//! The application: shared state, background tasks, and serving with graceful shutdown.

use std::{collections::HashMap, future::Future, ops::Deref, sync::Arc, time::Duration};

use anyhow::Context as _;
use tokio::{
    net::TcpListener,
    sync::{Notify, broadcast},
    task::JoinHandle,
    time::Instant,
};
use tokio_util::sync::CancellationToken;

use crate::{
    agent::PendingCallbacks,
    config::{Config, Profile},
    feishu_api::FeishuClient,
    feishu_api::identity::Identities,
    feishu_api::outbound::{FeishuOutbound, Outbound},
    inbox::{Committer, Pipeline, Processed, Worker},
    protocol::{Credentials, crypto::AesKey},
    store::{self, Store},
    telemetry::Metrics,
    turns::queue::SessionQueues,
    turns::{RunnerParts, TurnDone, TurnRunner},
};

/// One profile's callback credentials, with the AES key derived once at start.
#[derive(Debug)]
pub struct ProfileKeys {
    profile: Profile,
    aes: Option<AesKey>,
}

impl ProfileKeys {
    fn new(profile: Profile) -> Self {
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
    /// Finished turns, for observers.
    pub turns_done: broadcast::Sender<TurnDone>,
    /// Turns waiting for an agent's signed callback.
    pub callbacks: Arc<PendingCallbacks>,
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

/// A started bridge: state, background tasks, and the means to stop them.
pub struct Bridge {
    state: AppState,
    worker_stop: CancellationToken,
    committer_stop: CancellationToken,
    turns_stop: CancellationToken,
    tasks: Vec<JoinHandle<()>>,
}

impl Bridge {
    /// Opens and migrates the configured database, then starts the background tasks.
    pub async fn start(config: Config) -> anyhow::Result<Self> {
        let store = store::open(&config.database)
            .await
            .with_context(|| format!("cannot open database {}", config.database.redacted_url()))?;
        Self::start_on(config, store).await
    }

    /// Migrates an opened store, starts the background tasks and learns each profile's
    /// bot identity (tests open stores with options of their own).
    pub async fn start_on(config: Config, store: Arc<dyn Store>) -> anyhow::Result<Self> {
        store.migrate().await.context("database migration failed")?;
        let bridge = Self::with_store(config, store);
        bridge
            .state
            .identities
            .resolve(
                &bridge.state.config,
                &bridge.state.clients,
                bridge.worker_stop.clone(),
            )
            .await;
        Ok(bridge)
    }

    /// Starts the background tasks on an already-migrated store.
    pub fn with_store(config: Config, store: Arc<dyn Store>) -> Self {
        let metrics = Metrics::new();
        let wake = Arc::new(Notify::new());
        let committer_stop = CancellationToken::new();
        let worker_stop = CancellationToken::new();
        let writers = match store.backend() {
            store::Backend::Sqlite => 1,
            store::Backend::Postgres => config.database.committers,
        };
        let (committer, mut tasks) = Committer::spawn(
            store.clone(),
            metrics.clone(),
            wake.clone(),
            writers,
            committer_stop.clone(),
        );
        let (processed, _) = broadcast::channel(1024);
        let config = Arc::new(config);
        let identities = Arc::new(Identities::default());
        let queues = SessionQueues::new();
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(10))
            .build()
            .unwrap_or_default();
        let clients: HashMap<String, Arc<FeishuClient>> = config
            .profiles
            .iter()
            .map(|p| (p.name.clone(), Arc::new(FeishuClient::new(http.clone(), p))))
            .collect();
        let outbound: Arc<dyn Outbound> = Arc::new(FeishuOutbound::new(
            config.clone(),
            clients.clone(),
            store.clone(),
        ));
        let (turns_done, _) = broadcast::channel(1024);
        let callbacks = Arc::new(PendingCallbacks::default());
        // The agent client has no overall timeout: each backend bounds its own turns.
        let agent_http = reqwest::Client::builder().build().unwrap_or_default();
        let turns_stop = CancellationToken::new();
        if config.worker.enabled {
            let turns = Arc::new(TurnRunner::new(RunnerParts {
                config: config.clone(),
                store: store.clone(),
                identities: identities.clone(),
                clients: clients.clone(),
                outbound: outbound.clone(),
                done: turns_done.clone(),
                agents: crate::agent::backends(&config, &agent_http, &callbacks),
                shutdown: turns_stop.clone(),
                metrics: metrics.clone(),
            }));
            let pipeline = Pipeline::new(
                config.clone(),
                store.clone(),
                identities.clone(),
                queues.clone(),
                outbound,
                turns.clone(),
            );
            let worker = Worker {
                store: store.clone(),
                pipeline: Arc::new(pipeline),
                config: config.worker.clone(),
                metrics: metrics.clone(),
                wake,
                processed: processed.clone(),
                stop: worker_stop.clone(),
                owner: config.replica_id(),
            };
            // Unfinished turns of an earlier run are queued before any new event is
            // processed, so each session keeps its order.
            let recovery_queues = queues.clone();
            tasks.push(tokio::spawn(async move {
                if let Err(e) = turns.recover(&recovery_queues).await {
                    tracing::error!(error = %e, "unfinished turns could not be read; they will be picked up at the next start");
                }
                worker.run().await;
            }));
        }
        let profiles = config
            .profiles
            .iter()
            .map(|p| (p.name.clone(), ProfileKeys::new(p.clone())))
            .collect();
        let app = App {
            config,
            profiles,
            store,
            committer,
            metrics,
            started: Instant::now(),
            processed,
            identities,
            queues,
            clients,
            turns_done,
            callbacks,
        };
        Self {
            state: AppState(Arc::new(app)),
            worker_stop,
            committer_stop,
            turns_stop,
            tasks,
        }
    }

    /// The shared state (tests subscribe to worker outcomes through it).
    pub fn state(&self) -> &AppState {
        &self.state
    }

    /// Serves HTTP on `listener`, within the connection limits of `[server]` (see
    /// [`crate::server`]), until `shutdown` resolves; then stops accepting, lets in-flight
    /// requests finish, lets the worker finish its current event, and stops the
    /// committers once nothing can submit to them any more.
    pub async fn serve(
        self,
        listener: TcpListener,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> anyhow::Result<()> {
        let grace = Duration::from_secs(self.state.config.server.shutdown_grace_secs);
        let router = crate::http::router(self.state.clone());
        let limits = crate::server::Limits::from_config(&self.state.config.server);
        let worker_stop = self.worker_stop.clone();
        let signalled = CancellationToken::new();
        let signalled_in = signalled.clone();
        let server = crate::server::serve(
            listener,
            router,
            limits,
            self.state.metrics.clone(),
            async move {
                shutdown.await;
                tracing::info!("shutting down: no new connections; finishing in-flight work");
                worker_stop.cancel();
                signalled_in.cancel();
            },
        );
        // Once the signal came, in-flight requests get `grace` to finish.
        tokio::select! {
            () = server => {}
            () = async { signalled.cancelled().await; tokio::time::sleep(grace).await } => {
                tracing::warn!("in-flight requests did not finish within the grace period");
            }
        }
        self.stop(grace).await;
        Ok(())
    }

    /// Stops the background tasks (used by `serve`, and by tests that never served):
    /// running turns are told to stop and get `grace` to finish.
    pub async fn stop(self, grace: Duration) {
        self.worker_stop.cancel();
        self.committer_stop.cancel();
        self.turns_stop.cancel();
        self.state.queues.cancel_all();
        if tokio::time::timeout(grace, self.state.queues.idle())
            .await
            .is_err()
        {
            tracing::warn!("turns did not finish within the grace period");
        }
        for task in self.tasks {
            if tokio::time::timeout(grace, task).await.is_err() {
                tracing::warn!("a background task did not stop within the grace period");
            }
        }
    }
}

/// Resolves on SIGTERM or Ctrl-C.
pub async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {}
        () = term => {}
    }
}

/// Binds the configured address and serves until SIGTERM or Ctrl-C.
pub async fn run(config: Config) -> anyhow::Result<()> {
    let addr = config.server.listen_addr();
    if config.profiles.is_empty() {
        tracing::warn!(
            "no profiles configured: add a [[profiles]] table (name, app_id, verification_token, \
             optional encrypt_key) to feishu-bridge.toml, or point --config / FEISHU_BRIDGE_CONFIG at a file"
        );
    }
    if config.server.admin_token().is_none() {
        tracing::warn!(%addr, "no admin_token: REST routes are open to anyone who can reach this address");
    }
    let bridge = Bridge::start(config).await?;
    let listener = TcpListener::bind(addr)
        .await
        .with_context(|| format!("cannot listen on {addr}"))?;
    let bound = listener.local_addr().unwrap_or(addr);
    tracing::info!(addr = %bound, backend = bridge.state.store.backend().as_str(), "feishu-bridge listening");
    bridge.serve(listener, shutdown_signal()).await
}
