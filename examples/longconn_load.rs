//! The load client of `bench/longconn.sh`: the same events through either way in, timed
//! from the sender's side.
//!
//! ```text
//! longconn_load longconn (--count N --window W | --rate R --duration S) --app-secret S \
//!     --acked FILE [--app-id ID] [--token T] [--bridge-pid-file FILE]
//! longconn_load webhook --url URL --encrypt-key K --token T \
//!     (--count N --window W | --rate R --duration S) --acked FILE [--app-id ID] \
//!     [--bridge-pid-file FILE]
//! ```
//!
//! `longconn` starts the fake Feishu (`bench/fake_longconn.rs`), prints its
//! `api_base=http://127.0.0.1:P` line, waits (at most 60 s) for a bridge to connect and
//! ping, then pushes every event over that one connection: with `--window`, W events in
//! flight (the next one pushed as each is acknowledged); with `--rate`, one every 1/R s.
//! `webhook` posts the same events, encrypted and signed, to the bridge's event URL: with
//! `--window`, W requests at a time over kept-alive connections; with `--rate`, each
//! request sent at its slot whatever the others do. Latency is from the push (or the
//! request's start) to the acknowledgement (or the response); at a fixed rate, from the
//! event's slot, so a sender that falls behind shows in the figures.
//!
//! Every event is prepared before the clock starts: the payloads, encoded frames and
//! sealed bodies. They are `im.message.receive_v1` group replies that mention another
//! bot and a person (`bench/sample_event.rs`), each with its own `event_id`, so a bridge
//! whose bot is `ou_bench_bot` routes them `observed`. What is not modelled: Feishu's
//! redelivery of an event answered 500 or not answered (counted as refused, or as
//! unanswered after 15 s without any answer).
//!
//! The ids of the events acknowledged 200 go to `--acked`, one a line, for the script to
//! find in the database. The last line on stdout is `longconn-load: RESULT key=value…`.

use std::{
    fs::File,
    io::{BufWriter, Write},
    process::ExitCode,
    sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
    },
    time::Duration,
};

use feishu_bridge::protocol::crypto;
use tokio::{sync::mpsc, task::JoinSet, time::Instant};

// The fake's Open API answers (`Reply`) are the demo's business, not the benchmark's.
#[allow(dead_code)]
#[path = "../bench/fake_longconn.rs"]
mod fake_longconn;
#[path = "../bench/sample_event.rs"]
mod sample_event;

use fake_longconn::{FakeFeishu, Push};
use sample_event::{Sample, sample_event};

const USAGE: &str = "usage: longconn_load longconn|webhook (--count N --window W | --rate R \
                     --duration S) --acked FILE [--app-id ID] [--app-secret S] [--url URL] \
                     [--encrypt-key K] [--token T] [--bridge-pid-file FILE]";
/// No answer at all for this long ends a run; what is left is unanswered.
const STALL: Duration = Duration::from_secs(15);

#[derive(Clone, Copy, PartialEq)]
enum Path {
    LongConn,
    Webhook,
}

#[derive(Clone, Copy)]
enum Load {
    /// This many events, W in flight.
    Window { count: usize, window: usize },
    /// R events/s for S seconds.
    Rate { rate: f64, secs: f64 },
}

struct Args {
    path: Path,
    load: Load,
    acked: String,
    app_id: String,
    app_secret: String,
    url: String,
    encrypt_key: String,
    token: String,
    bridge_pid_file: Option<String>,
}

fn parse_args() -> Result<Args, String> {
    let mut args = std::env::args().skip(1);
    let path = match args.next().as_deref() {
        Some("longconn") => Path::LongConn,
        Some("webhook") => Path::Webhook,
        _ => return Err(USAGE.into()),
    };
    let known = [
        "--count",
        "--window",
        "--rate",
        "--duration",
        "--acked",
        "--app-id",
        "--app-secret",
        "--url",
        "--encrypt-key",
        "--token",
        "--bridge-pid-file",
    ];
    let mut value = std::collections::HashMap::new();
    while let Some(flag) = args.next() {
        if !known.contains(&flag.as_str()) {
            return Err(format!("unknown argument {flag}\n{USAGE}"));
        }
        let v = args
            .next()
            .ok_or_else(|| format!("{flag} needs a value\n{USAGE}"))?;
        value.insert(flag, v);
    }
    let text = |k: &str| value.get(k).cloned();
    let number = |k: &str| -> Result<Option<f64>, String> {
        text(k)
            .map(|v| {
                v.parse::<f64>()
                    .map_err(|_| format!("{k}: not a number: {v}"))
            })
            .transpose()
    };
    let load = match (number("--count")?, number("--window")?) {
        (Some(count), Some(window)) if count >= 1.0 && window >= 1.0 => Load::Window {
            count: count as usize,
            window: window as usize,
        },
        _ => match (number("--rate")?, number("--duration")?) {
            (Some(rate), Some(secs)) if rate > 0.0 && secs > 0.0 => Load::Rate { rate, secs },
            _ => {
                return Err(format!(
                    "give --count and --window, or --rate and --duration\n{USAGE}"
                ));
            }
        },
    };
    let required = |k: &str| {
        text(k)
            .filter(|v| !v.is_empty())
            .ok_or_else(|| format!("{k} is required\n{USAGE}"))
    };
    Ok(Args {
        path,
        load,
        acked: required("--acked")?,
        app_id: text("--app-id").unwrap_or_else(|| "cli_bench".into()),
        app_secret: if path == Path::LongConn {
            required("--app-secret")?
        } else {
            String::new()
        },
        url: if path == Path::Webhook {
            required("--url")?
        } else {
            String::new()
        },
        encrypt_key: if path == Path::Webhook {
            required("--encrypt-key")?
        } else {
            String::new()
        },
        token: text("--token").unwrap_or_default(),
        bridge_pid_file: text("--bridge-pid-file"),
    })
}

/// The plaintext events of this run: distinct ids, 16 chats, 64 senders.
fn events(args: &Args, n: usize) -> (Vec<String>, Vec<String>) {
    let run: u32 = rand::random();
    let now = feishu_bridge::util::now_ms().to_string();
    let texts = [
        "@_user_1 @_user_2 the nightly build is green again; can one of you re-run the \
         long-connection soak on staging before the release cut? 今天下午之前就好。",
        "@_user_1 @_user_2 summarise the incident thread above into a timeline with owners, \
         and link the dashboards we looked at. 谢谢, 明天的复盘会要用。",
    ];
    let mut ids = Vec::with_capacity(n);
    let mut payloads = Vec::with_capacity(n);
    for seq in 0..n {
        let id = format!("{run:08x}{seq:024x}");
        let (chat, sender) = (seq % 16, seq % 64);
        payloads.push(sample_event(&Sample {
            event_id: &id,
            message_id: &format!("om_{id}"),
            chat_id: &format!("oc_longconn_bench_chat_{chat:04x}"),
            sender: (
                &format!("on_longconn_bench_{sender:04x}"),
                &format!("u{sender:07x}"),
                &format!("ou_longconn_bench_{sender:04x}"),
            ),
            token: &args.token,
            app_id: &args.app_id,
            create_time_ms: &now,
            text: texts[seq % texts.len()],
        }));
        ids.push(id);
    }
    (ids, payloads)
}

/// One answered event: its index, whether it was acknowledged 200, and its latency.
struct Answer {
    index: usize,
    ok: bool,
    latency: Duration,
}

/// What a run saw.
#[derive(Default)]
struct Tally {
    answers: Vec<Answer>,
    /// Events the client failed to send (no connection, a transport error).
    errors: usize,
    started: Option<Instant>,
    last: Option<Instant>,
    biz_rt_ms: Vec<f64>,
}

impl Tally {
    fn answered(&mut self, index: usize, ok: bool, latency: Duration) {
        self.answers.push(Answer { index, ok, latency });
        self.last = Some(Instant::now());
    }
}

#[tokio::main]
async fn main() -> ExitCode {
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(2);
        }
    };
    match run(&args).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("longconn-load: {e}");
            ExitCode::FAILURE
        }
    }
}

async fn run(args: &Args) -> Result<(), String> {
    let n = match args.load {
        Load::Window { count, .. } => count,
        Load::Rate { rate, secs } => (rate * secs).round().max(1.0) as usize,
    };
    let (ids, payloads) = events(args, n);
    let (tally, cpu) = match args.path {
        Path::LongConn => longconn(args, payloads).await?,
        Path::Webhook => webhook(args, &payloads).await?,
    };
    report(args, &ids, &tally, cpu)
}

/// CPU time (user + system) of process `pid` ("self" for this one), in clock ticks.
fn cpu_ticks(pid: &str) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the command name (which is in parentheses and may hold spaces).
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    Some(fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?)
}

/// The bridge's pid, from the file the script writes (waiting up to 10 s for it).
async fn bridge_pid(args: &Args) -> Option<String> {
    let file = args.bridge_pid_file.as_ref()?;
    for _ in 0..100 {
        if let Ok(pid) = std::fs::read_to_string(file) {
            let pid = pid.trim().to_string();
            if !pid.is_empty() {
                return Some(pid);
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    None
}

/// CPU ticks of (this process, the bridge) over a run.
struct Cpu {
    client: Option<u64>,
    bridge: Option<u64>,
}

struct CpuClock {
    bridge: Option<String>,
    client0: Option<u64>,
    bridge0: Option<u64>,
}

impl CpuClock {
    async fn start(args: &Args) -> Self {
        let bridge = bridge_pid(args).await;
        Self {
            client0: cpu_ticks("self"),
            bridge0: bridge.as_deref().and_then(cpu_ticks),
            bridge,
        }
    }

    fn stop(self) -> Cpu {
        let since = |now: Option<u64>, then: Option<u64>| Some(now?.saturating_sub(then?));
        Cpu {
            client: since(cpu_ticks("self"), self.client0),
            bridge: since(self.bridge.as_deref().and_then(cpu_ticks), self.bridge0),
        }
    }
}

async fn longconn(args: &Args, payloads: Vec<String>) -> Result<(Tally, Cpu), String> {
    let (fake, mut observed) = FakeFeishu::start(&args.app_id, &args.app_secret, "ou_bench_bot")
        .await
        .map_err(|e| format!("cannot start the fake Feishu: {e}"))?;
    println!("longconn-load: api_base={}", fake.api_base);
    let _ = std::io::stdout().flush();
    let pushes: Vec<Push> = payloads
        .into_iter()
        .enumerate()
        .map(|(i, p)| Push::event(i as u64 + 1, p.into_bytes()))
        .collect();
    tokio::time::timeout(Duration::from_secs(60), fake.connected(1))
        .await
        .map_err(|_| "no bridge connected within 60 s")?;
    let clock = CpuClock::start(args).await;
    let mut tally = Tally::default();
    let n = pushes.len();
    let mut pushed = 0;
    let mut answered = 0;
    let t0 = Instant::now();
    tally.started = Some(t0);
    let push = |i: usize, since: Instant, tally: &mut Tally| {
        if !fake.push(&pushes[i], since) {
            tally.errors += 1;
        }
    };
    let slot = |i: usize| match args.load {
        Load::Rate { rate, .. } => t0 + Duration::from_secs_f64(i as f64 / rate),
        Load::Window { .. } => t0,
    };
    if let Load::Window { window, .. } = args.load {
        while pushed < window.min(n) {
            push(pushed, Instant::now(), &mut tally);
            pushed += 1;
        }
    }
    while answered + tally.errors < n {
        let rate_push = matches!(args.load, Load::Rate { .. }) && pushed < n;
        let due = slot(pushed);
        tokio::select! {
            biased;
            ack = tokio::time::timeout(STALL, observed.acks.recv()) => {
                let Ok(Some(ack)) = ack else { break };
                let index = (ack.seq_id as usize).saturating_sub(1);
                tally.answered(index, ack.code == 200, ack.latency);
                tally.biz_rt_ms.extend(ack.biz_rt_ms.map(|ms| ms as f64));
                answered += 1;
                if matches!(args.load, Load::Window { .. }) && pushed < n {
                    push(pushed, Instant::now(), &mut tally);
                    pushed += 1;
                }
            }
            () = tokio::time::sleep_until(due), if rate_push => {
                push(pushed, due, &mut tally);
                pushed += 1;
            }
        }
    }
    let cpu = clock.stop();
    if fake.strays() > 0 {
        eprintln!(
            "longconn-load: {} frames matched nothing pushed",
            fake.strays()
        );
    }
    println!(
        "longconn-load: urls_issued={} strays={}",
        fake.urls_issued(),
        fake.strays()
    );
    fake.stop().await;
    Ok((tally, cpu))
}

/// The signed, encrypted callbacks: (timestamp, nonce, signature, body).
fn sealed(args: &Args, payloads: &[String]) -> Vec<(String, String, String, String)> {
    let timestamp = feishu_bridge::util::now_secs().to_string();
    payloads
        .iter()
        .map(|plain| {
            let nonce = rand::random::<u32>().to_string();
            let key = Some(args.encrypt_key.as_str());
            let (body, signature) = crypto::seal(key, &timestamp, &nonce, rand::random(), plain);
            (timestamp.clone(), nonce, signature, body)
        })
        .collect()
}

async fn post(
    client: &reqwest::Client,
    url: &str,
    (ts, nonce, signature, body): &(String, String, String, String),
) -> Result<bool, ()> {
    let sent = client
        .post(url)
        .header("content-type", "application/json")
        .header("x-lark-request-timestamp", ts)
        .header("x-lark-request-nonce", nonce)
        .header("x-lark-signature", signature)
        .body(body.clone())
        .send()
        .await
        .map_err(|_| ())?;
    let ok = sent.status() == reqwest::StatusCode::OK;
    sent.bytes().await.map_err(|_| ())?;
    Ok(ok)
}

async fn webhook(args: &Args, payloads: &[String]) -> Result<(Tally, Cpu), String> {
    let requests = Arc::new(sealed(args, payloads));
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(10))
        .pool_max_idle_per_host(1024)
        .build()
        .map_err(|e| format!("no HTTP client: {e}"))?;
    let url: Arc<str> = args.url.as_str().into();
    let n = requests.len();
    let (tx, mut rx) = mpsc::unbounded_channel::<(usize, Result<bool, ()>, Duration)>();
    let clock = CpuClock::start(args).await;
    let mut tally = Tally::default();
    let t0 = Instant::now();
    tally.started = Some(t0);
    let mut tasks = JoinSet::new();
    match args.load {
        Load::Window { window, .. } => {
            let next = Arc::new(AtomicUsize::new(0));
            for _ in 0..window.min(n) {
                let (client, url, requests, next, tx) = (
                    client.clone(),
                    url.clone(),
                    requests.clone(),
                    next.clone(),
                    tx.clone(),
                );
                tasks.spawn(async move {
                    loop {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        let Some(request) = requests.get(i) else {
                            break;
                        };
                        let since = Instant::now();
                        let got = post(&client, &url, request).await;
                        let _ = tx.send((i, got, since.elapsed()));
                    }
                });
            }
        }
        Load::Rate { rate, .. } => {
            let (client, url, requests, tx) =
                (client.clone(), url.clone(), requests.clone(), tx.clone());
            tasks.spawn(async move {
                let mut inflight = JoinSet::new();
                for i in 0..requests.len() {
                    let slot = t0 + Duration::from_secs_f64(i as f64 / rate);
                    tokio::time::sleep_until(slot).await;
                    let (client, url, requests, tx) =
                        (client.clone(), url.clone(), requests.clone(), tx.clone());
                    inflight.spawn(async move {
                        let got = post(&client, &url, &requests[i]).await;
                        let _ = tx.send((i, got, slot.elapsed()));
                    });
                }
                while inflight.join_next().await.is_some() {}
            });
        }
    }
    drop(tx);
    let mut seen = 0;
    while seen < n {
        match tokio::time::timeout(STALL, rx.recv()).await {
            Ok(Some((i, Ok(ok), latency))) => tally.answered(i, ok, latency),
            Ok(Some((_, Err(()), _))) => tally.errors += 1,
            _ => break,
        }
        seen += 1;
    }
    let cpu = clock.stop();
    tasks.abort_all();
    Ok((tally, cpu))
}

/// The value at quantile `q` of sorted `v`, in ms.
fn quantile(v: &[f64], q: f64) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v[((v.len() - 1) as f64 * q).round() as usize]
}

fn report(args: &Args, ids: &[String], tally: &Tally, cpu: Cpu) -> Result<(), String> {
    let mut out = File::create(&args.acked)
        .map(BufWriter::new)
        .map_err(|e| format!("cannot write {}: {e}", args.acked))?;
    let mut ms: Vec<f64> = Vec::new();
    for a in tally.answers.iter().filter(|a| a.ok) {
        writeln!(out, "{}", ids[a.index])
            .map_err(|e| format!("cannot write {}: {e}", args.acked))?;
        ms.push(a.latency.as_secs_f64() * 1000.0);
    }
    out.flush()
        .map_err(|e| format!("cannot write {}: {e}", args.acked))?;
    ms.sort_by(f64::total_cmp);
    let mut biz = tally.biz_rt_ms.clone();
    biz.sort_by(f64::total_cmp);
    let ok = ms.len();
    let answered = tally.answers.len();
    let secs = match (tally.started, tally.last) {
        (Some(a), Some(b)) => b.duration_since(a).as_secs_f64(),
        _ => 0.0,
    };
    // One clock tick is 10 ms on Linux (USER_HZ 100).
    let tick_ms = |t: Option<u64>| t.map_or_else(|| "?".into(), |t| (t * 10).to_string());
    println!(
        "longconn-load: RESULT path={} sent={} ok={ok} refused={} errors={} unanswered={} \
         duration_s={secs:.3} ok_per_s={:.1} p50_ms={:.3} p99_ms={:.3} max_ms={:.3} \
         biz_rt_p50_ms={:.0} biz_rt_p99_ms={:.0} client_cpu_ms={} bridge_cpu_ms={}",
        if args.path == Path::LongConn {
            "longconn"
        } else {
            "webhook"
        },
        ids.len(),
        answered - ok,
        tally.errors,
        ids.len() - answered - tally.errors,
        if secs > 0.0 { ok as f64 / secs } else { 0.0 },
        quantile(&ms, 0.5),
        quantile(&ms, 0.99),
        ms.last().copied().unwrap_or(f64::NAN),
        quantile(&biz, 0.5),
        quantile(&biz, 0.99),
        tick_ms(cpu.client),
        tick_ms(cpu.bridge),
    );
    Ok(())
}
