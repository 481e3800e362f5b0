//! The event sender: a steady rate of signed callbacks spread over the live bridges, each
//! answer recorded with its HTTP status and latency (to the last byte of the answer).
//! Deliveries are bounded (10 s, far past any ack deadline), so a hung bridge shows as
//! an answer that never came, not as a stuck harness.

use std::{
    sync::{
        Arc, Mutex,
        atomic::{AtomicU64, Ordering},
    },
    time::{Duration, Instant},
};

use tokio::{sync::Semaphore, task::JoinSet};
use tokio_util::sync::CancellationToken;

use super::events::{Event, EventGen, KEYS};

/// How one delivery went.
#[derive(Debug, Clone)]
pub struct Outcome {
    /// Which bridge it went to (index in the target list).
    pub target: usize,
    /// The HTTP status; `None`: no answer (refused connection, reset, timeout).
    pub status: Option<u16>,
    /// Request sent → whole answer read.
    pub latency: Duration,
    /// When it was sent, since the load started.
    pub sent_at: Duration,
    /// Answered `x-feishu-bridge-outcome: duplicate` (stored before).
    pub duplicate: bool,
    /// Why there was no answer (the client's error, with its causes).
    pub error: Option<String>,
}

/// An event and the answer to its delivery.
#[derive(Debug, Clone)]
pub struct Sent {
    /// The event.
    pub event: Event,
    /// Its answer.
    pub outcome: Outcome,
}

/// The sender and the bridges it sends to.
pub struct Load {
    client: reqwest::Client,
    /// Event URLs by target index; `None` while that bridge is down.
    targets: Mutex<Vec<Option<String>>>,
    started: Instant,
    sent: AtomicU64,
    unavailable: AtomicU64,
    stop: CancellationToken,
}

/// Most deliveries in flight at once: enough that a bridge answering at its deadline
/// still sees the full rate (Feishu does not slow down for a slow endpoint), under the
/// bridge's default connection cap (512).
const IN_FLIGHT: usize = 400;

impl Load {
    /// A sender to these bridge base URLs (`http://127.0.0.1:port`).
    pub fn new(bases: &[String]) -> Arc<Self> {
        let client = reqwest::Client::builder()
            .no_proxy()
            .timeout(Duration::from_secs(10))
            .pool_max_idle_per_host(IN_FLIGHT)
            .build()
            .expect("http client");
        let targets = bases.iter().map(|b| Some(event_url(b))).collect();
        Arc::new(Self {
            client,
            targets: Mutex::new(targets),
            started: Instant::now(),
            sent: AtomicU64::new(0),
            unavailable: AtomicU64::new(0),
            stop: CancellationToken::new(),
        })
    }

    /// Sends `count` events of `events` at `rate` per second (fewer if the bridges are
    /// slower than that: at most 400 in flight) until done or stopped; every answer.
    pub fn spawn(
        self: &Arc<Self>,
        events: EventGen,
        rate: f64,
        count: u64,
    ) -> tokio::task::JoinHandle<Vec<Sent>> {
        let load = self.clone();
        tokio::spawn(async move {
            let gate = Arc::new(Semaphore::new(IN_FLIGHT));
            let mut running = JoinSet::new();
            let begun = Instant::now();
            let mut tick = tokio::time::interval(Duration::from_millis(5));
            let mut seq = 0u64;
            'sending: while seq < count {
                tokio::select! {
                    _ = load.stop.cancelled() => break,
                    _ = tick.tick() => {}
                }
                let due = (begun.elapsed().as_secs_f64() * rate) as u64;
                while seq < count.min(due) {
                    let permit = tokio::select! {
                        _ = load.stop.cancelled() => break 'sending,
                        p = gate.clone().acquire_owned() => p.expect("semaphore open"),
                    };
                    let Some((target, url)) = load.pick(seq) else {
                        break 'sending;
                    };
                    let event = events.event(seq);
                    let me = load.clone();
                    running.spawn(async move {
                        let outcome = me.deliver(&event, target, &url).await;
                        drop(permit);
                        Sent { event, outcome }
                    });
                    load.sent.fetch_add(1, Ordering::SeqCst);
                    seq += 1;
                }
            }
            let mut all = Vec::with_capacity(seq as usize);
            while let Some(done) = running.join_next().await {
                all.push(done.expect("delivery task"));
            }
            all.sort_by_key(|s| s.event.seq);
            all
        })
    }

    /// The live target for event `seq` (round robin over the live ones).
    fn pick(&self, seq: u64) -> Option<(usize, String)> {
        let targets = self.targets.lock().expect("lock");
        let live: Vec<(usize, &String)> = targets
            .iter()
            .enumerate()
            .filter_map(|(i, t)| t.as_ref().map(|u| (i, u)))
            .collect();
        if live.is_empty() {
            return None;
        }
        let (i, url) = live[(seq % live.len() as u64) as usize];
        Some((i, url.clone()))
    }

    /// Stops sending (deliveries in flight finish).
    pub fn stop(&self) {
        self.stop.cancel();
    }

    /// Events sent so far.
    pub fn sent(&self) -> u64 {
        self.sent.load(Ordering::SeqCst)
    }

    /// Answers 503 so far (redeliveries included).
    pub fn unavailable(&self) -> u64 {
        self.unavailable.load(Ordering::SeqCst)
    }

    /// Time since the load was made.
    pub fn elapsed(&self) -> Duration {
        self.started.elapsed()
    }

    /// Waits until `n` events were sent, at most `limit`; whether they were.
    pub async fn wait_sent(&self, n: u64, limit: Duration) -> bool {
        let deadline = Instant::now() + limit;
        while self.sent() < n {
            if Instant::now() >= deadline || self.stop.is_cancelled() {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        true
    }

    /// Takes target `i` out of the rotation (its bridge is down) or back (`base`).
    pub fn set_target(&self, i: usize, base: Option<&str>) {
        self.targets.lock().expect("lock")[i] = base.map(event_url);
    }

    /// Delivers `event` again to the first live target, as Feishu retries an event it
    /// had no 200 for; the answer.
    pub async fn redeliver(&self, event: &Event) -> Outcome {
        let Some((target, url)) = self.pick(0) else {
            return self.no_answer(0, Instant::now(), "no live target".into());
        };
        self.deliver(event, target, &url).await
    }

    /// One POST of `event` to `url`.
    pub async fn deliver(&self, event: &Event, target: usize, url: &str) -> Outcome {
        let d = event.delivery();
        let t0 = Instant::now();
        let answer = self
            .client
            .post(url)
            .header("content-type", "application/json")
            .header("x-lark-request-timestamp", &d.timestamp)
            .header("x-lark-request-nonce", &d.nonce)
            .header("x-lark-signature", &d.signature)
            .body(d.body)
            .send()
            .await;
        let answer = match answer {
            Ok(answer) => answer,
            Err(e) => return self.no_answer(target, t0, error_chain(&e)),
        };
        let status = answer.status().as_u16();
        let duplicate = answer
            .headers()
            .get("x-feishu-bridge-outcome")
            .is_some_and(|v| v == "duplicate");
        if let Err(e) = answer.bytes().await {
            return self.no_answer(target, t0, error_chain(&e));
        }
        if status == 503 {
            self.unavailable.fetch_add(1, Ordering::SeqCst);
        }
        Outcome {
            target,
            status: Some(status),
            latency: t0.elapsed(),
            sent_at: t0.duration_since(self.started),
            duplicate,
            error: None,
        }
    }

    fn no_answer(&self, target: usize, t0: Instant, error: String) -> Outcome {
        Outcome {
            target,
            status: None,
            latency: t0.elapsed(),
            sent_at: t0.saturating_duration_since(self.started),
            duplicate: false,
            error: Some(error),
        }
    }
}

/// A client error with each of its causes, outermost first.
fn error_chain(e: &reqwest::Error) -> String {
    let mut words = e.to_string();
    let mut cause = std::error::Error::source(e);
    while let Some(c) = cause {
        words.push_str(": ");
        words.push_str(&c.to_string());
        cause = c.source();
    }
    words
}

fn event_url(base: &str) -> String {
    format!("{base}/webhook/{}/event", KEYS.profile)
}
