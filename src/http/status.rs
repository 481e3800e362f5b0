//! `/status`: what an operator checks first. Never a secret.

use axum::Json;
use serde::Serialize;
use utoipa::ToSchema;

use super::{Admin, ApiError, ErrorBody};
use crate::{
    config::{Config, Connection, DigestConfig, Profile},
    longconn::status::ConnView,
    state::App,
    store::{DigestRunRow, FeedCounts, InboxCounts, InboxProblem, ProfileBacklog, ReplicaRow},
    util::UnixMs,
};

/// `GET /status`.
#[derive(Debug, Serialize, ToSchema)]
pub struct StatusBody {
    /// Crate version.
    pub version: &'static str,
    /// Seconds since start.
    pub uptime_secs: u64,
    pub database: DatabaseStatus,
    /// Configured profiles.
    pub profiles: Vec<ProfileStatus>,
    /// Inbox depth.
    pub inbox: InboxStatusBody,
    /// Turn queue (filled in by the turn runner).
    pub turns: TurnsStatus,
    /// The daily digest.
    pub digest: DigestStatusBody,
    /// The batched feed.
    pub feed: FeedStatusBody,
    /// Display names of senders and chats.
    pub names: crate::names::NamesStatusBody,
}

/// `feed` of [`StatusBody`].
#[derive(Debug, Serialize, ToSchema)]
pub struct FeedStatusBody {
    /// `feed.enabled` (profiles and workspaces may override it).
    pub enabled: bool,
    /// Every configured profile, in config order.
    pub profiles: Vec<FeedProfileBody>,
}

/// One profile's feed; counts are null when the database did not answer.
#[derive(Debug, Serialize, ToSchema)]
pub struct FeedProfileBody {
    pub profile: String,
    /// Messages gathered, not yet packed into a segment.
    pub gathered: Option<i64>,
    /// Segments packed, waiting for room among their session's unread ones (or for
    /// the session's first turn).
    pub waiting: Option<i64>,
    /// Segments attached to their session's history, not yet read by a turn.
    pub attached: Option<i64>,
}

/// `digest` of [`StatusBody`].
#[derive(Debug, Serialize, ToSchema)]
pub struct DigestStatusBody {
    /// `digest.enabled`.
    pub enabled: bool,
    /// Local start time and end of its window, `HH:MM`.
    pub at: String,
    pub window_end: String,
    /// The IANA time zone in force: `digest.timezone`, else `UTC`.
    pub timezone: String,
    /// Whether `digest.timezone` is set; when not, the digest runs in UTC (and
    /// `check-config` warns while the digest is enabled).
    pub timezone_set: bool,
    /// `digest.include_dms`: direct-message sessions are digested too.
    pub include_dms: bool,
    /// The latest run (by any replica), with its date and duration; `null` before the
    /// first or when the database does not answer.
    pub last_run: Option<super::digests::RunBody>,
}

/// `database` of [`StatusBody`].
#[derive(Debug, Serialize, ToSchema)]
pub struct DatabaseStatus {
    /// `sqlite` or `postgres`.
    pub backend: &'static str,
    /// Answered a ping just now.
    pub ok: bool,
}

/// One profile, without its secrets.
#[derive(Debug, Serialize, ToSchema)]
pub struct ProfileStatus {
    pub name: String,
    /// Feishu app id (the profile's bridge id).
    pub app_id: String,
    /// The bot's own open_id: configured, or learned from the bot info API; null while
    /// unknown (group messages are then neither captured nor acted on).
    pub bot_open_id: Option<String>,
    /// `echo`, `webhook` or `openai`.
    pub agent_kind: &'static str,
    /// Whether callbacks must be encrypted and signed.
    pub encrypted: bool,
    /// How its events arrive: `webhook` or `websocket`.
    pub connection: &'static str,
    /// Its long connection (websocket profiles only).
    pub long_connection: Option<LongConnectionBody>,
    /// The reaction its bot puts on a request while the turn runs.
    pub working_reaction: crate::turns::working::WorkingReactionStatus,
}

/// A profile's long connection.
#[derive(Debug, Serialize, ToSchema)]
pub struct LongConnectionBody {
    /// `connecting`, `connected`, `backing_off` or `stopped`.
    pub state: &'static str,
    /// Unix ms it entered that state.
    pub since: i64,
    /// Why it is backing off or stopped, or, while connecting again, why the attempt
    /// before failed: a refusal by Feishu, or by the egress proxy (which names the proxy
    /// by `host:port`, never its credentials). Null while connected.
    pub reason: Option<String>,
    /// Unix ms of the next attempt, while backing off.
    pub next_attempt_at: Option<i64>,
    /// Unix ms of the last ping sent.
    pub last_ping_at: Option<i64>,
    /// Unix ms of the last pong received.
    pub last_pong_at: Option<i64>,
    /// Connections made again since start.
    pub reconnects: u64,
}

impl LongConnectionBody {
    fn of(v: crate::longconn::status::ConnView) -> Self {
        Self {
            state: v.state.as_str(),
            since: v.since.millis(),
            reason: v.reason,
            next_attempt_at: v.next_attempt_at.map(|t| t.millis()),
            last_ping_at: v.last_ping_at.map(|t| t.millis()),
            last_pong_at: v.last_pong_at.map(|t| t.millis()),
            reconnects: v.reconnects,
        }
    }
}

/// `inbox` of [`StatusBody`]; counts are absent when the database did not answer.
#[derive(Debug, Serialize, ToSchema)]
pub struct InboxStatusBody {
    /// Waiting for the worker (including scheduled retries).
    pub pending: Option<i64>,
    /// Being processed.
    pub processing: Option<i64>,
    /// Failed at least once, waiting for a retry.
    pub retrying: Option<i64>,
    /// Gave up after the last attempt.
    pub failed: Option<i64>,
    /// Per profile with unfinished events: the worker's lag (empty when the database
    /// did not answer or nothing waits).
    pub backlog: Vec<ProfileBacklogBody>,
    /// Events the worker finished per second, averaged over the last 10 seconds.
    pub worker_events_per_sec: f64,
    /// The most recent failing events.
    pub problems: Vec<InboxProblemBody>,
}

/// One profile's unfinished events.
#[derive(Debug, Serialize, ToSchema)]
pub struct ProfileBacklogBody {
    pub profile: String,
    /// Events pending or in hand.
    pub depth: i64,
    /// Seconds since the oldest of them arrived.
    pub oldest_pending_age_secs: f64,
}

/// A failing event.
#[derive(Debug, Serialize, ToSchema)]
pub struct InboxProblemBody {
    pub profile: String,
    pub event_id: String,
    pub event_type: String,
    /// `pending` (will retry) or `failed`.
    pub status: &'static str,
    /// Attempts so far.
    pub attempts: i64,
    pub last_error: Option<String>,
}

/// `turns` of [`StatusBody`].
#[derive(Debug, Serialize, ToSchema)]
pub struct TurnsStatus {
    /// Persisted turns waiting behind their session's earlier ones (null when the
    /// database does not answer).
    pub queued: Option<i64>,
    /// Persisted turns handed to their agent.
    pub running: Option<i64>,
    /// This process's `worker.replica_id`: the owner named on the turns it queues.
    pub replica_id: String,
    /// The replicas whose heartbeat is younger than `worker.lease_ms` (this one
    /// included when its worker runs), by id; empty when the database does not answer.
    pub replicas: Vec<ReplicaBody>,
    /// How many replicas (this one included) share each app's Open API limits as this
    /// one counts them. Calls are recorded in the database so that all of them together
    /// keep the limits; when it cannot record one, this replica keeps to 1/n of them.
    pub open_api_share: u32,
}

/// A live replica.
#[derive(Debug, Serialize, ToSchema)]
pub struct ReplicaBody {
    pub replica_id: String,
    /// Unix ms it started.
    pub started_at: i64,
    /// Unix ms of its latest heartbeat.
    pub heartbeat_at: i64,
}

/// Version, uptime, database, profiles, inbox depth and failures.
#[utoipa::path(get, path = "/status", tag = "operations",
    security(("bearer" = [])),
    responses(
        (status = 200, description = "Status (never contains a secret)", body = StatusBody),
        (status = 401, description = "`unauthorized`", body = ErrorBody),
    ))]
pub async fn status(Admin(app): Admin) -> Result<Json<StatusBody>, ApiError> {
    let ok = app.store.ping().await.is_ok();
    // The reads only when the database answered the ping, and at the same time.
    let read = match ok {
        true => Readings::of(&app).await,
        false => Readings::default(),
    };
    Ok(Json(StatusBody {
        version: env!("CARGO_PKG_VERSION"),
        uptime_secs: app.started.elapsed().as_secs(),
        database: DatabaseStatus {
            backend: app.store.backend().as_str(),
            ok,
        },
        profiles: app
            .config
            .profiles
            .iter()
            .map(|p| profile_status(&app, p))
            .collect(),
        inbox: inbox_status(&app, read.counts, read.backlog, read.problems),
        turns: turns_status(&app, read.turns, read.replicas),
        digest: digest_status(&app.config.digest, read.last_run),
        feed: feed_status(&app.config, read.feed),
        names: app.names.status(&profile_names(&app), read.names),
    }))
}

/// What `/status` reads from the database; empty (or `None`) where a read failed.
#[derive(Default)]
struct Readings {
    counts: Option<InboxCounts>,
    turns: Option<(i64, i64)>,
    problems: Vec<InboxProblem>,
    backlog: Vec<ProfileBacklog>,
    last_run: Option<DigestRunRow>,
    replicas: Vec<ReplicaRow>,
    feed: Option<Vec<FeedCounts>>,
    names: Option<Vec<(String, i64)>>,
}

impl Readings {
    /// Every read, at the same time.
    async fn of(app: &App) -> Self {
        let lease = std::time::Duration::from_millis(app.config.worker.lease_ms);
        let alive_since = crate::store::alive_since(UnixMs::now(), lease);
        let (depth, turns, problems, last_run, replicas, feed, names) = tokio::join!(
            app.store.inbox_depth(),
            app.store.turn_counts(),
            app.store.inbox_problems(10),
            app.store.latest_digest_run(),
            app.store.replicas(alive_since),
            app.store.feed_counts(),
            app.store.names_counts()
        );
        let (counts, backlog) = match depth {
            Ok(d) => (Some(d.counts), d.backlog),
            Err(_) => (None, Vec::new()),
        };
        Self {
            counts,
            turns: turns.ok(),
            problems: problems.unwrap_or_default(),
            backlog,
            last_run: last_run.ok().flatten(),
            replicas: replicas.unwrap_or_default(),
            feed: feed.ok(),
            names: names.ok(),
        }
    }
}

fn profile_names(app: &App) -> Vec<String> {
    app.config.profiles.iter().map(|p| p.name.clone()).collect()
}

/// One configured profile, with the bot id it has learned and its connection's state.
fn profile_status(app: &App, p: &Profile) -> ProfileStatus {
    let websocket = p.connection == Connection::Websocket;
    ProfileStatus {
        name: p.name.clone(),
        app_id: p.app_id.clone(),
        bot_open_id: app
            .identities
            .get(&p.name)
            .or_else(|| p.bot_open_id.clone().filter(|id| !id.is_empty())),
        agent_kind: p.agent.kind.as_str(),
        encrypted: p.encrypt_key().is_some(),
        connection: match p.connection {
            Connection::Webhook => "webhook",
            Connection::Websocket => "websocket",
        },
        long_connection: websocket.then(|| {
            LongConnectionBody::of(
                app.connections
                    .get(&p.name)
                    .unwrap_or_else(|| ConnView::starting(&p.name)),
            )
        }),
        working_reaction: app.working.status(&p.name),
    }
}

fn inbox_status(
    app: &App,
    counts: Option<InboxCounts>,
    backlog: Vec<ProfileBacklog>,
    problems: Vec<InboxProblem>,
) -> InboxStatusBody {
    let now = UnixMs::now();
    InboxStatusBody {
        pending: counts.map(|c| c.pending),
        processing: counts.map(|c| c.processing),
        retrying: counts.map(|c| c.retrying),
        failed: counts.map(|c| c.failed),
        backlog: backlog
            .into_iter()
            .map(|b| ProfileBacklogBody {
                oldest_pending_age_secs: b
                    .oldest_received_at
                    .map(|t| super::metrics::age_secs(now, t))
                    .unwrap_or(0.0),
                profile: b.profile,
                depth: b.depth,
            })
            .collect(),
        worker_events_per_sec: app.metrics.worker_rate.per_second(),
        problems: problems.into_iter().map(InboxProblemBody::from).collect(),
    }
}

impl From<InboxProblem> for InboxProblemBody {
    fn from(p: InboxProblem) -> Self {
        Self {
            profile: p.profile,
            event_id: p.event_id,
            event_type: p.event_type,
            status: p.status.as_str(),
            attempts: p.attempts,
            last_error: p.last_error,
        }
    }
}

fn turns_status(app: &App, turns: Option<(i64, i64)>, replicas: Vec<ReplicaRow>) -> TurnsStatus {
    TurnsStatus {
        queued: turns.map(|t| t.0),
        running: turns.map(|t| t.1),
        replica_id: app.config.replica_id(),
        replicas: replicas
            .into_iter()
            .map(|r| ReplicaBody {
                replica_id: r.replica_id,
                started_at: r.started_at.0,
                heartbeat_at: r.heartbeat_at.0,
            })
            .collect(),
        open_api_share: u32::try_from(app.api_share.replicas()).unwrap_or(u32::MAX),
    }
}

fn digest_status(d: &DigestConfig, last_run: Option<DigestRunRow>) -> DigestStatusBody {
    DigestStatusBody {
        enabled: d.enabled,
        at: d.at.clone(),
        window_end: d.window_end.clone(),
        timezone: d.timezone_name().to_string(),
        timezone_set: d.timezone.is_some(),
        include_dms: d.include_dms,
        last_run: last_run.as_ref().map(super::digests::RunBody::from),
    }
}

/// Every configured profile's feed: zeros where nothing waits, nulls when the counts
/// could not be read.
fn feed_status(config: &Config, counts: Option<Vec<FeedCounts>>) -> FeedStatusBody {
    let of = |name: &str| match &counts {
        None => (None, None, None),
        Some(all) => {
            let c = all.iter().find(|c| c.profile == name);
            let n = |f: fn(&FeedCounts) -> i64| Some(c.map_or(0, f));
            (n(|c| c.gathered), n(|c| c.waiting), n(|c| c.attached))
        }
    };
    FeedStatusBody {
        enabled: config.feed.enabled,
        profiles: config
            .profiles
            .iter()
            .map(|p| {
                let (gathered, waiting, attached) = of(&p.name);
                FeedProfileBody {
                    profile: p.name.clone(),
                    gathered,
                    waiting,
                    attached,
                }
            })
            .collect(),
    }
}
