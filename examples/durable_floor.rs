//! The durable floor: the least work an acknowledged Feishu event needs, and nothing
//! else. Each POST is signature-checked and decrypted with the crate's own protocol
//! functions, its event id is read, and it is inserted into a one-table SQLite database
//! (WAL, `synchronous = FULL`) before the 200 goes out. Concurrent requests share one
//! transaction (group commit).
//!
//! ```text
//! cargo run --release --example durable_floor -- \
//!     --listen 127.0.0.1:18081 --db floor.db --encrypt-key KEY
//! ```
//!
//! The load script runs it beside the bridge: the bridge's distance from this floor is
//! what its routing, metrics, inbox bookkeeping and worker cost; the distance from the
//! floor to `bare_axum` is what verification and durability cost on this machine.
//!
//! Left out on purpose: the verification token, the freshness window, deadline and
//! body-limit handling, metrics, logging and any processing of the stored events.

use std::{process::ExitCode, sync::Arc};

use axum::{
    Router,
    body::Bytes,
    extract::State,
    http::{HeaderMap, StatusCode, header},
    response::{IntoResponse, Response},
    routing::post,
};
use feishu_bridge::protocol::crypto::{self, AesKey};
use serde::Deserialize;
use sqlx::{
    Connection, QueryBuilder, Sqlite, SqliteConnection,
    sqlite::{SqliteConnectOptions, SqliteJournalMode, SqliteSynchronous},
};
use tokio::sync::{mpsc, oneshot};

const USAGE: &str = "usage: durable_floor --listen ADDR --db FILE --encrypt-key KEY";

/// Most events in one transaction (two bound values each, far below SQLite's limit).
const MAX_BATCH: usize = 512;
/// Requests waiting for the committer; when full, handlers wait (backpressure).
const QUEUE: usize = 8192;

/// One request waiting for its event to be durable.
struct Job {
    event_id: String,
    payload: String,
    done: oneshot::Sender<bool>,
}

struct Floor {
    encrypt_key: String,
    aes: AesKey,
    commits: mpsc::Sender<Job>,
}

#[derive(Deserialize)]
struct Outer {
    encrypt: String,
}

/// Only the id is read from the plaintext: it is the row's key, so a retried delivery
/// is stored once.
#[derive(Deserialize)]
struct Envelope {
    header: Header,
}

#[derive(Deserialize)]
struct Header {
    event_id: String,
}

fn answer(status: StatusCode, body: &'static str) -> Response {
    (status, [(header::CONTENT_TYPE, "application/json")], body).into_response()
}

async fn event(State(floor): State<Arc<Floor>>, headers: HeaderMap, body: Bytes) -> Response {
    let get = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    let (Some(ts), Some(nonce), Some(signature)) = (
        get("x-lark-request-timestamp"),
        get("x-lark-request-nonce"),
        get("x-lark-signature"),
    ) else {
        return answer(StatusCode::UNAUTHORIZED, r#"{"msg":"unsigned"}"#);
    };
    // Signature over the raw bytes first, as Feishu defines it; only then parse.
    let expected = crypto::event_signature(ts, nonce, &floor.encrypt_key, &body);
    if !crypto::signature_matches(&expected, signature) {
        return answer(StatusCode::UNAUTHORIZED, r#"{"msg":"bad signature"}"#);
    }
    let Ok(outer) = serde_json::from_slice::<Outer>(&body) else {
        return answer(StatusCode::BAD_REQUEST, r#"{"msg":"not encrypted"}"#);
    };
    let Ok(plain) = crypto::decrypt(&floor.aes, &outer.encrypt) else {
        return answer(StatusCode::BAD_REQUEST, r#"{"msg":"undecryptable"}"#);
    };
    let Ok(payload) = String::from_utf8(plain) else {
        return answer(StatusCode::BAD_REQUEST, r#"{"msg":"not utf-8"}"#);
    };
    let Ok(envelope) = serde_json::from_str::<Envelope>(&payload) else {
        return answer(StatusCode::BAD_REQUEST, r#"{"msg":"no event id"}"#);
    };
    let (done, stored) = oneshot::channel();
    let job = Job {
        event_id: envelope.header.event_id,
        payload,
        done,
    };
    if floor.commits.send(job).await.is_err() {
        return answer(StatusCode::SERVICE_UNAVAILABLE, r#"{"msg":"stopped"}"#);
    }
    match stored.await {
        Ok(true) => answer(StatusCode::OK, r#"{"msg":"success"}"#),
        _ => answer(StatusCode::SERVICE_UNAVAILABLE, r#"{"msg":"not stored"}"#),
    }
}

/// Takes whatever is queued (at least one job, at most `MAX_BATCH`), writes it in one
/// transaction and answers every waiter, then repeats. While a batch is being written
/// the next one gathers in the channel, so the fsync is shared under load and an event
/// alone is written at once.
async fn committer(mut db: SqliteConnection, mut jobs: mpsc::Receiver<Job>) {
    let mut batch = Vec::with_capacity(MAX_BATCH);
    while jobs.recv_many(&mut batch, MAX_BATCH).await > 0 {
        // One multi-row statement outside an explicit BEGIN is one transaction, and
        // saves the BEGIN and COMMIT round trips to sqlx's connection thread.
        let mut insert =
            QueryBuilder::<Sqlite>::new("INSERT OR IGNORE INTO events (event_id, payload) ");
        insert.push_values(&batch, |mut row, job| {
            row.push_bind(job.event_id.as_str())
                .push_bind(job.payload.as_str());
        });
        let ok = match insert.build().execute(&mut db).await {
            Ok(_) => true,
            Err(e) => {
                eprintln!("durable_floor: batch of {} not stored: {e}", batch.len());
                false
            }
        };
        for job in batch.drain(..) {
            // A waiter that went away needs no answer.
            let _ = job.done.send(ok);
        }
    }
}

async fn open(path: &str) -> Result<SqliteConnection, sqlx::Error> {
    let options = SqliteConnectOptions::new()
        .filename(path)
        .create_if_missing(true)
        .journal_mode(SqliteJournalMode::Wal)
        .synchronous(SqliteSynchronous::Full);
    let mut db = SqliteConnection::connect_with(&options).await?;
    sqlx::query(
        "CREATE TABLE IF NOT EXISTS events (event_id TEXT PRIMARY KEY, payload TEXT NOT NULL)",
    )
    .execute(&mut db)
    .await?;
    Ok(db)
}

struct Args {
    listen: String,
    db: String,
    encrypt_key: String,
}

fn parse_args() -> Result<Args, String> {
    let (mut listen, mut db, mut encrypt_key) = (None, None, None);
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let value = args
            .next()
            .ok_or_else(|| format!("{flag} needs a value\n{USAGE}"))?;
        match flag.as_str() {
            "--listen" => listen = Some(value),
            "--db" => db = Some(value),
            "--encrypt-key" => encrypt_key = Some(value),
            other => return Err(format!("unknown argument {other}\n{USAGE}")),
        }
    }
    let missing = |name: &str| format!("{name} is required\n{USAGE}");
    Ok(Args {
        listen: listen.ok_or_else(|| missing("--listen"))?,
        db: db.ok_or_else(|| missing("--db"))?,
        encrypt_key: encrypt_key
            .filter(|k| !k.is_empty())
            .ok_or_else(|| missing("--encrypt-key"))?,
    })
}

async fn run(args: Args) -> Result<(), String> {
    let db = open(&args.db)
        .await
        .map_err(|e| format!("cannot open {}: {e}", args.db))?;
    let (commits, jobs) = mpsc::channel(QUEUE);
    tokio::spawn(committer(db, jobs));
    let floor = Arc::new(Floor {
        aes: AesKey::derive(&args.encrypt_key),
        encrypt_key: args.encrypt_key,
        commits,
    });
    let app = Router::new()
        .route("/", post(event))
        .route("/{*path}", post(event))
        .with_state(floor);
    let listener = tokio::net::TcpListener::bind(&args.listen)
        .await
        .map_err(|e| format!("cannot listen on {}: {e}", args.listen))?;
    eprintln!("durable_floor listening on {} ({})", args.listen, args.db);
    axum::serve(listener, app)
        .await
        .map_err(|e| format!("server failed: {e}"))
}

#[tokio::main]
async fn main() -> ExitCode {
    let args = match parse_args() {
        Ok(a) => a,
        Err(msg) => {
            eprintln!("{msg}");
            return ExitCode::from(2);
        }
    };
    match run(args).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(msg) => {
            eprintln!("durable_floor: {msg}");
            ExitCode::FAILURE
        }
    }
}
