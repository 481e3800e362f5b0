//! Store-backed cost of one turn's context, by thread size and backend.
//!
//! For a thread of 100, 10,000 and 100,000 recorded events, on SQLite and on Postgres:
//!
//! * `select_assemble`: what the turn runner does to build a prompt from the thread:
//!   `thread_candidates` with the runner's window (`limit * 2 + 32`, limit 20), the rows
//!   turned into selector candidates, `select_thread` in shared mode, and
//!   `prompt::assemble` around the request (the topic root was delivered on an earlier
//!   turn, so it is not read again);
//! * `explain_latest`: `explain::load` of the latest decision of the thread, as
//!   `GET /explain/{root_msg_id}` serves it.
//!
//! Each size gets a fresh database (a SQLite file in a temporary directory, a Postgres
//! schema), populated through `record_events` in batches of 1,000: a topic root, then
//! about 70% human messages recorded by `planner`, 20% agent outputs of `coder` and 10%
//! requests (recorded without an item), 100 to 400 characters each, interleaved with as
//! many events in each of 9 other threads of the same chat, so the event table holds ten
//! times the thread. The turn's own request comes last. One decision, made from a real
//! selection, is recorded for `explain_latest`. Postgres tables are then vacuumed and
//! analyzed, as autovacuum would after the load. Every database is built (concurrently)
//! before the first measurement, so nothing else runs while one is timed.
//!
//! Both reads are bounded by a `LIMIT`, so the 100,000 case should stay within twice the
//! 100 case. Both backends walk the thread's `(chat_id, root_msg_id, created_at,
//! message_id, id)` index backwards: the query orders by that whole key, so no planner
//! can prefer the primary key.
//!
//! Postgres comes from `FEISHU_BRIDGE_TEST_PG_URL` (default: the local server's `test`
//! database); when it cannot be reached only SQLite is measured. Schemas are named
//! `fbbench_<unix secs>_<random>` and dropped at the end, like the SQLite directories
//! (`fbbench_…` in the temporary directory); leftovers of interrupted runs older than two
//! hours are removed by the next run.
//!
//! Run with `cargo bench --bench selection` (add `-- sqlite` or `-- postgres` to measure
//! one backend; the databases of the other are still built).

use std::{
    hint::black_box,
    str::FromStr,
    sync::Arc,
    time::{Duration, Instant, SystemTime, UNIX_EPOCH},
};

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use feishu_bridge::{
    config::{DatabaseConfig, WorkspaceMode},
    context::{
        collector::{metadata, token_estimate},
        prompt::{self, PromptParts},
        report::{ExcludedItem, SelectedItem},
        selector::{self, Diagnostics, Request, Selection},
    },
    explain::{self, Query},
    store::{self, NewContextEvent, NewDecision, NewItem, Store},
    util::UnixMs,
    vocab::{EventType, ItemType, Role},
};
use secrecy::SecretString;
use sqlx::{Connection, Executor, PgConnection, postgres::PgConnectOptions};
use tokio::{runtime::Runtime, task::JoinSet};

const SIZES: [usize; 3] = [100, 10_000, 100_000];
/// Threads in the chat: the measured one plus noise.
const THREADS: usize = 10;
const BATCH: usize = 1_000;

const CHAT_ID: &str = "oc_bench";
const ROOT: &str = "om_root";
const REQUEST_ID: &str = "om_request";
const REQUEST_TEXT: &str = "@planner can you turn the discussion above into a rollout plan \
                            with owners, and call out anything still undecided?";

const PLANNER: &str = "planner";
const PLANNER_APP: &str = "cli_a1b2c3d4e5f60718";
const PLANNER_OPEN_ID: &str = "ou_0b7f2c3d4e5f60718293a4b5c6d7e8f9";
const CODER: &str = "coder";
const CODER_APP: &str = "cli_b2c3d4e5f6071829";
const CODER_OPEN_ID: &str = "ou_1c8a3d4e5f60718293a4b5c6d7e8f90a";

/// The runner's defaults.
const LIMIT: usize = 20;
const MAX_CHARS: usize = 24_000;
const MAX_AGENT_OUTPUT_CHARS: usize = 20_000;

const PG_DEFAULT_URL: &str = "postgres://postgres@127.0.0.1:5432/test";
const PREFIX: &str = "fbbench_";

const PEOPLE: [(&str, &str); 6] = [
    ("ou_84aad35d084aa403a838cf73ee18467a", "Li Wei"),
    ("ou_7e6d5c4b3a29180716253443526170ab", "Zhang Min"),
    ("ou_2f3e4d5c6b7a89900112233445566778", "Anna Schmidt"),
    ("ou_99aa88bb77cc66dd55ee44ff33001122", "Wang Fang"),
    ("ou_5a4b3c2d1e0f99887766554433221100", "Carlos Ruiz"),
    ("ou_c0ffee00112233445566778899aabbcc", "Chen Jing"),
];

/// What chat lines are made of.
const WORDS: &str = "the release branch build deploy staging rollback migration index query \
                     latency p99 went up after we merged the retry patch please check logs \
                     worker timeout flaky test websocket owner tomorrow before freeze agreed \
                     plan risk customer ticket backfill 发布 需要 确认 回滚 方案 明天 上线 \
                     数据库 监控 告警";

/// A small deterministic generator (xorshift64*), so every run writes the same data.
struct Rng {
    state: u64,
    words: Vec<&'static str>,
}

impl Rng {
    fn new(seed: u64) -> Self {
        Self {
            state: seed | 1,
            words: WORDS.split_whitespace().collect(),
        }
    }

    fn next(&mut self) -> u64 {
        self.state ^= self.state >> 12;
        self.state ^= self.state << 25;
        self.state ^= self.state >> 27;
        self.state.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    /// 100 to 400 characters of chat-like text.
    fn text(&mut self) -> String {
        let target = 100 + self.below(301);
        let mut out = String::with_capacity(target * 2);
        let mut chars = 0;
        while chars < target {
            if chars > 0 {
                out.push(if self.below(12) == 0 { '\n' } else { ' ' });
                chars += 1;
            }
            let pick = self.below(self.words.len());
            let w = self.words[pick];
            out.push_str(w);
            chars += w.chars().count();
        }
        out.chars().take(target).collect()
    }
}

fn root_of(thread: usize) -> String {
    if thread == 0 {
        ROOT.to_string()
    } else {
        format!("{ROOT}{thread}")
    }
}

fn scope_of(root: &str) -> String {
    format!("thread:{CHAT_ID}:{root}")
}

/// Event `k` of thread `thread`: the root first, then the mix.
fn event(thread: usize, k: usize, seq: i64, rng: &mut Rng) -> NewContextEvent {
    let root = root_of(thread);
    let scope = scope_of(&root);
    let created_at = UnixMs(1_735_689_600_000 + seq * 1_500);
    let roll = rng.below(100);
    let text = rng.text();
    let (who, label) = PEOPLE[rng.below(PEOPLE.len())];
    let human = |event_type: EventType, message_id: String, item: bool| NewContextEvent {
        chat_id: CHAT_ID.into(),
        chat_type: feishu_bridge::vocab::ChatType::Group,
        root_msg_id: root.clone(),
        thread_id: Some(format!("omt_{thread:016x}")),
        event_type,
        actor_type: "user".into(),
        actor_id: who.into(),
        bridge_id: PLANNER_APP.into(),
        bot_profile: PLANNER.into(),
        target_id: (!item).then(|| PLANNER_OPEN_ID.into()),
        target_name: (!item).then(|| PLANNER.into()),
        session_name: (!item).then(|| scope.clone()),
        history_scope: scope.clone(),
        metadata_json: metadata("text", false, false, (k > 0).then_some(root.as_str())).to_string(),
        created_at,
        item: ItemType::of(event_type)
            .filter(|_| item)
            .map(|item_type| NewItem {
                item_type,
                role: Role::Human,
                author_label: label.into(),
                token_estimate: token_estimate(&text),
                text: text.clone(),
                truncated: false,
            }),
        text: text.clone(),
        message_id,
    };
    let message_id = format!("om_{thread:02x}{k:030x}");
    if k == 0 {
        human(EventType::TopicRoot, root.clone(), true)
    } else if roll < 70 {
        human(EventType::HumanMessage, message_id, true)
    } else if roll < 90 {
        NewContextEvent {
            chat_id: CHAT_ID.into(),
            chat_type: feishu_bridge::vocab::ChatType::Group,
            root_msg_id: root.clone(),
            thread_id: Some(format!("omt_{thread:016x}")),
            message_id: message_id.clone(),
            event_type: EventType::AgentOutput,
            actor_type: "bot".into(),
            actor_id: CODER_OPEN_ID.into(),
            bridge_id: CODER_APP.into(),
            bot_profile: CODER.into(),
            target_id: None,
            target_name: None,
            session_name: Some(scope.clone()),
            history_scope: scope.clone(),
            metadata_json: serde_json::json!({"truncated": false, "reply_to": message_id})
                .to_string(),
            created_at,
            item: Some(NewItem {
                item_type: ItemType::AgentOutput,
                role: Role::Bot,
                author_label: format!("{CODER} (agent)"),
                token_estimate: token_estimate(&text),
                text: text.clone(),
                truncated: false,
            }),
            text,
        }
    } else {
        human(EventType::UserRequest, message_id, false)
    }
}

fn pg_base_url() -> String {
    std::env::var("FEISHU_BRIDGE_TEST_PG_URL").unwrap_or_else(|_| PG_DEFAULT_URL.to_string())
}

fn unix_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or_default()
}

/// A Postgres schema that exists for one database; dropped with the guard.
struct PgSchema {
    base: String,
    name: String,
}

/// Whether Postgres answers (printing a notice when it does not); also drops the
/// leftovers of interrupted runs.
async fn postgres_reachable(base: &str) -> bool {
    match tokio::time::timeout(Duration::from_secs(5), PgConnection::connect(base)).await {
        Ok(Ok(mut conn)) => {
            sweep_old_schemas(&mut conn).await;
            true
        }
        Ok(Err(e)) => {
            eprintln!("NOTICE: Postgres at {base} is unreachable ({e}); benchmarking SQLite only");
            false
        }
        Err(_) => {
            eprintln!("NOTICE: Postgres at {base} did not answer; benchmarking SQLite only");
            false
        }
    }
}

impl PgSchema {
    /// Creates a fresh schema.
    async fn create(base: &str) -> Self {
        let name = format!("{PREFIX}{}_{:08x}", unix_secs(), rand::random::<u32>());
        pg_execute(base, &format!("CREATE SCHEMA {name}"))
            .await
            .expect("create schema");
        Self {
            base: base.to_string(),
            name,
        }
    }

    /// The base URL with `search_path` set to the schema.
    fn url(&self) -> String {
        let sep = if self.base.contains('?') { '&' } else { '?' };
        format!("{}{sep}options=-c%20search_path%3D{}", self.base, self.name)
    }
}

impl Drop for PgSchema {
    fn drop(&mut self) {
        let (base, name) = (self.base.clone(), self.name.clone());
        // A private runtime on its own thread: drop may run while unwinding anywhere.
        let _ = std::thread::spawn(move || {
            let Ok(rt) = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            else {
                return;
            };
            rt.block_on(async {
                if let Ok(opts) = PgConnectOptions::from_str(&base)
                    && let Ok(mut c) = PgConnection::connect_with(&opts).await
                {
                    let _ = sqlx::query(&format!("DROP SCHEMA IF EXISTS {name} CASCADE"))
                        .execute(&mut c)
                        .await;
                }
            });
        })
        .join();
    }
}

/// Runs one statement on its own connection.
async fn pg_execute(url: &str, sql: &str) -> Result<(), sqlx::Error> {
    let mut conn = PgConnection::connect(url).await?;
    conn.execute(sql).await?;
    Ok(())
}

/// Drops `fbbench_` schemas older than two hours (interrupted runs).
async fn sweep_old_schemas(conn: &mut PgConnection) {
    let names: Vec<String> = sqlx::query_scalar(
        "SELECT nspname::text FROM pg_namespace WHERE nspname LIKE 'fbbench\\_%'",
    )
    .fetch_all(&mut *conn)
    .await
    .unwrap_or_default();
    let now = unix_secs();
    for name in names {
        let secs: Option<u64> = name
            .strip_prefix(PREFIX)
            .and_then(|rest| rest.split('_').next())
            .and_then(|s| s.parse().ok());
        if secs.is_some_and(|s| s + 7200 < now) {
            let _ = sqlx::query(&format!("DROP SCHEMA IF EXISTS {name} CASCADE"))
                .execute(&mut *conn)
                .await;
        }
    }
}

/// Removes `fbbench_` temporary directories older than two hours (interrupted runs: a
/// SQLite database of the largest size takes more than a gigabyte).
fn sweep_old_dirs() {
    let Ok(entries) = std::fs::read_dir(std::env::temp_dir()) else {
        return;
    };
    let old = Duration::from_secs(7200);
    for entry in entries.flatten() {
        let stale = entry
            .metadata()
            .and_then(|m| m.modified())
            .is_ok_and(|t| t.elapsed().is_ok_and(|age| age > old));
        if stale && entry.file_name().to_string_lossy().starts_with(PREFIX) {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

/// One populated database.
struct Fixture {
    backend: &'static str,
    n: usize,
    store: Arc<dyn Store>,
    _dir: Option<tempfile::TempDir>,
    _schema: Option<PgSchema>,
}

async fn open(url: String) -> Arc<dyn Store> {
    let config = DatabaseConfig {
        url: SecretString::from(url),
        // A batch of 1,000 events is one operation: give it room on a slow disk.
        timeout_ms: 60_000,
        ..DatabaseConfig::default()
    };
    let store = store::open(&config).await.expect("open store");
    store.migrate().await.expect("migrate");
    store
}

/// Writes the thread of `n` events, the noise threads and the request.
async fn populate(store: &Arc<dyn Store>, n: usize, in_flight: usize) {
    let mut rng = Rng::new(0x9e37_79b9_7f4a_7c15 ^ n as u64);
    let mut tasks = JoinSet::new();
    let mut batch = Vec::with_capacity(BATCH);
    let mut seq = 0i64;
    // The request is the thread's last event; the other threads end at the same length.
    for k in 0..n {
        for thread in 0..THREADS {
            if thread == 0 && k == n - 1 {
                continue;
            }
            batch.push(event(thread, k, seq, &mut rng));
            seq += 1;
            if batch.len() == BATCH {
                let events = std::mem::replace(&mut batch, Vec::with_capacity(BATCH));
                let store = Arc::clone(store);
                tasks.spawn(async move { store.record_events(&events).await });
                while tasks.len() >= in_flight {
                    joined(tasks.join_next().await);
                }
            }
        }
    }
    while let Some(r) = tasks.join_next().await {
        joined(Some(r));
    }
    let mut request = event(0, n - 1, seq, &mut rng);
    while request.event_type != "user_request" {
        request = event(0, n - 1, seq, &mut rng);
    }
    request.message_id = REQUEST_ID.into();
    request.text = REQUEST_TEXT.into();
    batch.push(request);
    store.record_events(&batch).await.expect("record events");
}

fn joined<E: std::fmt::Debug>(r: Option<Result<Result<(), E>, tokio::task::JoinError>>) {
    if let Some(r) = r {
        r.expect("populate task").expect("record events");
    }
}

/// What the turn runner does for the thread context of one turn.
async fn select_and_assemble(store: &dyn Store) -> (Selection, String) {
    let window = i64::try_from(LIMIT * 2 + 32).unwrap_or(i64::MAX);
    let rows = store
        .thread_candidates(
            feishu_bridge::store::ProfileThread::new(PLANNER, CHAT_ID, ROOT),
            window,
        )
        .await
        .expect("thread candidates");
    let req = Request {
        bridge_id: PLANNER_APP,
        profile: PLANNER,
        mode: WorkspaceMode::Shared,
        message_id: REQUEST_ID,
        is_command: false,
        limit: LIMIT,
        max_chars: MAX_CHARS,
        max_agent_output_chars: MAX_AGENT_OUTPUT_CHARS,
    };
    let selection = selector::select_thread(&req, rows);
    let prompt = prompt::assemble(&PromptParts {
        request: REQUEST_TEXT,
        thread: &selection.selected,
        ..PromptParts::default()
    });
    (selection, prompt)
}

/// The decision the runner would record for that turn.
fn decision(selection: &Selection, prompt: &str) -> NewDecision {
    let selected: Vec<SelectedItem> = selection.selected.iter().map(SelectedItem::from).collect();
    let excluded: Vec<ExcludedItem> = selection
        .excluded
        .iter()
        .cloned()
        .map(ExcludedItem::from)
        .collect();
    let context_chars: usize = selected.iter().map(|s| s.chars).sum();
    let thread_context = selection
        .selected
        .iter()
        .map(|s| format!("{}: {}", s.author_label, s.text))
        .collect::<Vec<_>>()
        .join("\n");
    NewDecision {
        chat_id: CHAT_ID.into(),
        root_msg_id: ROOT.into(),
        message_id: REQUEST_ID.into(),
        bridge_id: PLANNER_APP.into(),
        bot_profile: PLANNER.into(),
        target_id: Some(PLANNER_OPEN_ID.into()),
        workspace_mode: "shared".into(),
        mode: "thread_context".into(),
        session_key: scope_of(ROOT),
        session_id: "2f9c1e4a-7b3d-4c8e-9a51-6d0b8e2f4a17".into(),
        request_text: REQUEST_TEXT.into(),
        thread_context,
        selected_item_ids_json: serde_json::to_string(
            &selection
                .selected
                .iter()
                .map(|s| s.item_id)
                .collect::<Vec<_>>(),
        )
        .expect("ids json"),
        selected_json: serde_json::to_string(&selected).expect("selected json"),
        excluded_json: serde_json::to_string(&excluded).expect("excluded json"),
        prompt_preview: prompt.to_string(),
        diagnostics_json: serde_json::json!({
            "thread": selection.diagnostics,
            "pending_history": Diagnostics::default(),
            "topic_root": "delivered_before",
            "quoted_reply": "none",
            "context_chars": context_chars,
        })
        .to_string(),
        source_message_ids: vec![REQUEST_ID.to_string()],
        created_at: UnixMs(1_735_689_600_000),
    }
}

fn query() -> Query<'static> {
    Query {
        profile: PLANNER,
        root_msg_id: ROOT,
        ..Query::default()
    }
}

/// A fresh database of `n` thread events, populated, with one decision recorded.
async fn fixture(backend: &'static str, n: usize) -> Fixture {
    let (url, dir, schema, in_flight) = if backend == "sqlite" {
        let dir = tempfile::Builder::new()
            .prefix(PREFIX)
            .tempdir()
            .expect("temp dir");
        let url = format!("sqlite://{}", dir.path().join("bridge.db").display());
        // One writer per file.
        (url, Some(dir), None, 1)
    } else {
        let schema = PgSchema::create(&pg_base_url()).await;
        (schema.url(), None, Some(schema), 2)
    };
    let store = open(url.clone()).await;
    let started = Instant::now();
    populate(&store, n, in_flight).await;
    let populated = started.elapsed();

    let (selection, prompt) = select_and_assemble(store.as_ref()).await;
    assert_eq!(selection.diagnostics.selected, LIMIT, "a full selection");
    store
        .record_decision(&decision(&selection, &prompt))
        .await
        .expect("record decision");
    let explained = explain::load(store.as_ref(), &query())
        .await
        .expect("explain")
        .expect("a decision");
    assert_eq!(explained.selected.len(), LIMIT);
    assert_eq!(explained.excluded.len(), selection.excluded.len());
    if backend == "postgres" {
        // What autovacuum does after a bulk load, done now so it does not run (and
        // replan) in the middle of a measurement.
        pg_execute(
            &url,
            "VACUUM (ANALYZE) thread_context_events, thread_context_items, \
             thread_context_decisions",
        )
        .await
        .expect("vacuum");
    }
    eprintln!(
        "{backend}/{n}: {} events in {:.1?}; {} candidates, {} selected, {} excluded, \
         prompt {} chars",
        n * THREADS,
        populated,
        selection.diagnostics.candidates,
        selection.diagnostics.selected,
        selection.excluded.len(),
        prompt.chars().count(),
    );
    Fixture {
        backend,
        n,
        store,
        _dir: dir,
        _schema: schema,
    }
}

fn selection(c: &mut Criterion) {
    let rt = Runtime::new().expect("tokio runtime");
    sweep_old_dirs();
    // Populating is bound by round trips, not by the CPU: build every database at once,
    // then measure with nothing else running.
    let started = Instant::now();
    let fixtures = rt.block_on(async {
        let base = pg_base_url();
        let mut backends = vec!["sqlite"];
        if postgres_reachable(&base).await {
            backends.push("postgres");
        }
        let mut builds = JoinSet::new();
        for &backend in &backends {
            for n in SIZES {
                builds.spawn(fixture(backend, n));
            }
        }
        let mut fixtures = Vec::new();
        while let Some(f) = builds.join_next().await {
            fixtures.push(f.expect("build task"));
        }
        fixtures.sort_by_key(|f| (f.backend != "sqlite", f.n));
        if backends.contains(&"postgres") {
            // Flush the load now rather than in the background of the measurements.
            if let Err(e) = pg_execute(&base, "CHECKPOINT").await {
                eprintln!("NOTICE: CHECKPOINT failed ({e}); writes may still be flushing");
            }
        }
        fixtures
    });
    eprintln!("databases built in {:.1?}", started.elapsed());

    let mut group = c.benchmark_group("select_assemble");
    for f in &fixtures {
        let store = f.store.as_ref();
        group.bench_function(BenchmarkId::new(f.backend, f.n), |b| {
            b.iter(|| rt.block_on(select_and_assemble(black_box(store))));
        });
    }
    group.finish();
    let mut group = c.benchmark_group("explain_latest");
    for f in &fixtures {
        let store = f.store.as_ref();
        group.bench_function(BenchmarkId::new(f.backend, f.n), |b| {
            b.iter(|| {
                rt.block_on(explain::load(black_box(store), &query()))
                    .expect("explain")
            });
        });
    }
    group.finish();
    // Stores close and schemas are dropped before the runtime goes.
    drop(fixtures);
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .sample_size(20)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3));
    targets = selection
}
criterion_main!(benches);
