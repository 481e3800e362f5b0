//! Assembling the application from its configuration, starting its background tasks
//! (committers, the worker, turn recovery), serving it, and stopping it.

use std::{collections::HashMap, future::Future, sync::Arc, time::Duration};

use anyhow::Context as _;
use tokio::{
    net::TcpListener,
    sync::{Notify, broadcast},
    task::JoinHandle,
    time::Instant,
};
use tokio_util::sync::CancellationToken;

use super::state::{App, AppState, ProfileKeys};
use crate::{
    agent::PendingCallbacks,
    config::Config,
    feishu_api::{
        FeishuClient,
        identity::Identities,
        outbound::{FeishuOutbound, Outbound},
    },
    inbox::{Committer, Pipeline, Worker},
    store::{self, Store},
    telemetry::Metrics,
    turns::{Recovery, RunnerParts, TurnRunner, queue::SessionQueues},
};

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
            store.backend(),
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
            let recovery = Recovery::new(turns.clone());
            tasks.push(tokio::spawn(async move {
                if let Err(e) = recovery.run(&recovery_queues).await {
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
