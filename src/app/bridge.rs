//! Assembling the application from its configuration, starting its background tasks
//! (committers, the worker, turn recovery), serving it, and stopping it.

use std::{collections::HashMap, future::Future, sync::Arc, time::Duration};

use anyhow::Context as _;
use tokio::{net::TcpListener, sync::broadcast, task::JoinHandle, time::Instant};
use tokio_util::sync::CancellationToken;

use crate::state::{App, AppState, ProfileKeys};
use crate::{
    agent::{
        PendingCallbacks,
        answer::{AnswerParts, AnswerSender},
    },
    config::{Config, Connection},
    digest::Digest,
    feed::Feed,
    feishu_api::{
        ApiShare, Budget, FeishuClient, Ledger,
        identity::Identities,
        outbound::{FeishuOutbound, Outbound},
    },
    inbox::{Arrivals, Committer, Pipeline, Worker},
    longconn::{self, session::LongConnection},
    names::Names,
    store::{self, Store},
    telemetry::Metrics,
    turns::{
        AskDuty, Recovery, ReplicaDuties, RunnerParts, TurnRunner, Working, queue::SessionQueues,
    },
    util::{Clock, SystemClock},
};

/// A started bridge: state, background tasks, and the means to stop them.
pub struct Bridge {
    state: AppState,
    stops: Stops,
    /// The long connections, stopped first.
    ingress: Vec<JoinHandle<()>>,
    tasks: Vec<JoinHandle<()>>,
}

/// What stops each kind of background task.
#[derive(Default)]
struct Stops {
    /// The long connections: stop reading, acknowledge what was stored, close.
    ingress: CancellationToken,
    worker: CancellationToken,
    committer: CancellationToken,
    turns: CancellationToken,
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
        Self::start_on_clock(config, store, Arc::new(SystemClock)).await
    }

    /// Opens and migrates the configured database, then starts with `clock` (tests).
    pub async fn start_with_clock(config: Config, clock: Arc<dyn Clock>) -> anyhow::Result<Self> {
        let store = store::open(&config.database)
            .await
            .with_context(|| format!("cannot open database {}", config.database.redacted_url()))?;
        Self::start_on_clock(config, store, clock).await
    }

    /// [`Self::start_on`] reading the time from `clock`.
    pub async fn start_on_clock(
        config: Config,
        store: Arc<dyn Store>,
        clock: Arc<dyn Clock>,
    ) -> anyhow::Result<Self> {
        store.migrate().await.context("database migration failed")?;
        let bridge = Self::with_store_and_clock(config, store, clock);
        let state = &bridge.state;
        let stop = bridge.stops.worker.clone();
        state
            .identities
            .resolve(&state.config, &state.clients, stop)
            .await;
        Ok(bridge)
    }

    /// Starts the background tasks on an already-migrated store: the committers, then
    /// (unless the worker is off) turn recovery followed by the worker.
    pub fn with_store(config: Config, store: Arc<dyn Store>) -> Self {
        Self::with_store_and_clock(config, store, Arc::new(SystemClock))
    }

    /// [`Self::with_store`] reading the time from `clock` (timed work: the batched feed).
    pub fn with_store_and_clock(
        config: Config,
        store: Arc<dyn Store>,
        clock: Arc<dyn Clock>,
    ) -> Self {
        let stops = Stops::default();
        let metrics = Metrics::new();
        let arrivals = Arc::new(Arrivals::default());
        let writers = match store.backend() {
            store::Backend::Sqlite => 1,
            store::Backend::Postgres => config.database.committers,
        };
        let (committer, mut tasks) = Committer::spawn(
            store.clone(),
            store.backend(),
            metrics.clone(),
            arrivals.clone(),
            writers,
            stops.committer.clone(),
        );
        let app = Arc::new(assemble(
            config,
            store,
            committer,
            metrics,
            clock,
            stops.worker.clone(),
        ));
        if app.config.worker.enabled {
            tasks.push(start_worker(&app, arrivals, &stops));
        }
        tasks.push(tokio::spawn(
            AskDuty {
                store: app.store.clone(),
                answers: app.answers.clone(),
                notes: app.turn_events.clone(),
                clock: app.clock.clone(),
            }
            .run(stops.worker.clone()),
        ));
        if app.config.names.enabled {
            tasks.push(tokio::spawn(app.names.clone().run(stops.worker.clone())));
        }
        if app.config.digest.enabled {
            tasks.push(tokio::spawn(
                app.digest.clone().run_schedule(stops.worker.clone()),
            ));
        }
        let state = AppState(app);
        let ingress = start_long_connections(&state, &stops);
        Self {
            state,
            stops,
            ingress,
            tasks,
        }
    }

    /// The shared state (tests subscribe to worker outcomes through it).
    pub fn state(&self) -> &AppState {
        &self.state
    }

    /// Serves HTTP on `listener`, within the connection limits of `[server]` (see
    /// [`crate::server`]), until `shutdown` resolves; then stops accepting, lets in-flight
    /// requests finish, lets the worker finish its current event and the card presses
    /// already answered be stored and acted on, and stops the committers once nothing
    /// can submit to them any more.
    pub async fn serve(
        self,
        listener: TcpListener,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> anyhow::Result<()> {
        let grace = Duration::from_secs(self.state.config.server.shutdown_grace_secs);
        let router = crate::http::router(self.state.clone());
        let limits = crate::server::Limits::from_config(&self.state.config.server);
        let worker_stop = self.stops.worker.clone();
        let ingress_stop = self.stops.ingress.clone();
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
                ingress_stop.cancel();
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
    /// card presses already answered get `grace` to be stored and acted on (through the
    /// committers, which stop after them); running turns are told to stop and get `grace`
    /// to finish.
    pub async fn stop(self, grace: Duration) {
        // The long connections first: they stop reading, and what they read is stored
        // and acknowledged before the committers stop.
        self.stops.ingress.cancel();
        for task in self.ingress {
            if tokio::time::timeout(grace, task).await.is_err() {
                tracing::warn!("a long connection did not close within the grace period");
            }
        }
        self.stops.worker.cancel();
        self.state.background.close();
        if tokio::time::timeout(grace, self.state.background.wait())
            .await
            .is_err()
        {
            tracing::warn!(
                presses = self.state.background.len(),
                "card presses answered before they were stored did not finish within the grace period"
            );
        }
        self.stops.committer.cancel();
        self.stops.turns.cancel();
        self.state.queues.cancel_all();
        if tokio::time::timeout(grace, self.state.queues.idle())
            .await
            .is_err()
        {
            tracing::warn!("turns did not finish within the grace period");
        }
        // The reactions of the turns that just ended are taken off.
        self.state.working.finish(grace).await;
        for task in self.tasks {
            if tokio::time::timeout(grace, task).await.is_err() {
                tracing::warn!("a background task did not stop within the grace period");
            }
        }
    }
}

/// The application state around a running committer.
fn assemble(
    config: Config,
    store: Arc<dyn Store>,
    committer: Committer,
    metrics: Metrics,
    clock: Arc<dyn Clock>,
    stop: CancellationToken,
) -> App {
    let config = Arc::new(config);
    let http = crate::config::clients::open_api(&config.egress, Duration::from_secs(10));
    // One call budget per app: profiles of the same app share Feishu's limits, and so do
    // the replicas on one Postgres database.
    let api_share = Arc::new(ApiShare::default());
    let mut budgets: HashMap<String, Arc<Budget>> = HashMap::new();
    let clients: HashMap<String, Arc<FeishuClient>> = config
        .profiles
        .iter()
        .map(|p| {
            let budget = budgets
                .entry(p.app_id.clone())
                .or_insert_with(|| {
                    // One process owns a SQLite file: its own count is the whole count.
                    let ledger = (store.backend() == store::Backend::Postgres)
                        .then(|| Ledger::new(store.clone(), &p.app_id));
                    Arc::new(Budget::new(api_share.clone(), ledger))
                })
                .clone();
            let client = FeishuClient::new(http.clone(), p, budget).with_clock(clock.clone());
            (p.name.clone(), Arc::new(client))
        })
        .collect();
    let profiles = config
        .profiles
        .iter()
        .map(|p| (p.name.clone(), ProfileKeys::new(p.clone())))
        .collect();
    let callbacks = Arc::new(PendingCallbacks::default());
    // The agent client has no overall timeout: each backend bounds its own turns.
    let agent_http = crate::config::clients::unbounded(&config.egress);
    let agents = crate::agent::backends(&config, &agent_http, &callbacks);
    let names = Arc::new(Names::new(
        config.names.clone(),
        store.clone(),
        clients.clone(),
        clock.clone(),
    ));
    let feed = Arc::new(
        Feed::new(
            config.clone(),
            store.clone(),
            agents.clone(),
            clock.clone(),
            metrics.clone(),
        )
        .with_names(names.clone()),
    );
    let digest = Arc::new(
        Digest::new(
            config.clone(),
            store.clone(),
            clock.clone(),
            metrics.clone(),
            agent_http.clone(),
        )
        .with_names(names.clone())
        .with_clients(clients.clone()),
    );
    let background = tokio_util::task::TaskTracker::new();
    let answers = Arc::new(AnswerSender::new(AnswerParts {
        http: agent_http.clone(),
        config: config.clone(),
        store: store.clone(),
        clock: clock.clone(),
        tasks: background.clone(),
        stop,
    }));
    let working = Arc::new(Working::new(
        config.clone(),
        clients.clone(),
        store.clone(),
        clock.clone(),
    ));
    App {
        config,
        profiles,
        store,
        committer,
        metrics,
        started: Instant::now(),
        processed: broadcast::channel(1024).0,
        identities: Arc::new(Identities::default()),
        queues: SessionQueues::new(),
        clients,
        api_share,
        turns_done: broadcast::channel(1024).0,
        turn_events: broadcast::channel(1024).0,
        callbacks,
        agents,
        feed,
        digest,
        names,
        working,
        clock,
        background,
        answers,
        connections: Arc::default(),
    }
}

/// Starts the long connection of every profile that receives over one.
fn start_long_connections(state: &AppState, stops: &Stops) -> Vec<JoinHandle<()>> {
    // No overall timeout: the socket lives long; each request bounds itself.
    let http = crate::config::clients::unbounded(&state.config.egress);
    let parts = longconn::Parts {
        presses: state.presses(),
        metrics: state.metrics.clone(),
        connections: state.connections.clone(),
    };
    state
        .config
        .profiles
        .iter()
        .filter(|p| p.connection == Connection::Websocket)
        .map(|p| {
            let conn = LongConnection::new(parts.clone(), p, http.clone(), stops.ingress.clone());
            tokio::spawn(conn.run())
        })
        .collect()
}

/// Starts the worker over `app`: first unfinished turns of an earlier run are queued,
/// before any new event is processed, so each session keeps its order.
fn start_worker(app: &App, arrivals: Arc<Arrivals>, stops: &Stops) -> JoinHandle<()> {
    let config = &app.config;
    let outbound: Arc<dyn Outbound> = Arc::new(FeishuOutbound::new(
        config.clone(),
        app.clients.clone(),
        app.store.clone(),
    ));
    let turns = Arc::new(TurnRunner::new(RunnerParts {
        config: config.clone(),
        store: app.store.clone(),
        identities: app.identities.clone(),
        clients: app.clients.clone(),
        outbound: outbound.clone(),
        done: app.turns_done.clone(),
        agents: app.agents.clone(),
        feed: app.feed.clone(),
        shutdown: stops.turns.clone(),
        metrics: app.metrics.clone(),
        names: app.names.clone(),
        turn_events: app.turn_events.clone(),
        working: app.working.clone(),
    }));
    let pipeline = Pipeline::new(
        config.clone(),
        app.store.clone(),
        app.identities.clone(),
        app.queues.clone(),
        outbound,
        turns.clone(),
        app.feed.clone(),
    );
    let worker = Worker {
        store: app.store.clone(),
        pipeline: Arc::new(pipeline),
        config: config.worker.clone(),
        metrics: app.metrics.clone(),
        arrivals,
        processed: app.processed.clone(),
        stop: stops.worker.clone(),
        owner: config.replica_id(),
    };
    let queues = app.queues.clone();
    if let Some(mut handed) = turns.take_handoffs() {
        let (runner, queues, stop) = (turns.clone(), queues.clone(), stops.turns.clone());
        tokio::spawn(async move {
            // Until shutdown: a handoff turn not submitted by then is queued in the
            // database and runs after the next start.
            while let Some(Some(job)) = stop.run_until_cancelled(handed.recv()).await {
                runner.submit(&queues, job);
            }
        });
    }
    let lease = Duration::from_millis(config.worker.lease_ms);
    let recovery = Recovery::new(turns, lease);
    let duties = ReplicaDuties::new(
        &recovery,
        &queues,
        &app.api_share,
        Duration::from_millis(config.worker.replica_poll_ms),
        Duration::from_secs(config.server.shutdown_grace_secs),
    );
    let duties_stop = stops.turns.clone();
    tokio::spawn(app.feed.clone().run(stops.worker.clone()));
    tokio::spawn(async move {
        // Alive before anything is picked up, so no other replica takes this one's turns.
        duties.join().await;
        if let Err(e) = recovery.run(&queues).await {
            tracing::error!(error = %e, "unfinished turns could not be read; they are picked up by the next sweep");
        }
        let duties = tokio::spawn(duties.run(duties_stop));
        worker.run().await;
        // The duties end after the turns: the heartbeat is given up last.
        if let Err(e) = duties.await {
            tracing::warn!(error = %e, "replica duties ended abnormally");
        }
    })
}
