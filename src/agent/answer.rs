//! Delivering the answer of an ask to its webhook agent: a signed `POST <agent url>`
//! with `{"kind":"answer", …}` (see `docs/turns.md`, "Asking the user").
//!
//! Once per answer, as far as the bridge can tell: a replica claims the delivery in the
//! database (a lease), POSTs, and marks it delivered; a failure (no connection, a 5xx)
//! is tried again with a growing pause while the turn runs, for at most [`PATIENCE`]
//! after the answer. A delivery whose replica stopped is taken up by the sweep
//! ([`AnswerSender::sweep`]) once its lease runs out, also after a restart. Each answer's
//! `webhook-id` is derived from its turn and ask, so an agent that sees it twice (a
//! replica that died between its POST and its mark) can tell.

use std::{
    collections::HashSet,
    sync::{Arc, Mutex},
    time::Duration,
};

use secrecy::ExposeSecret;
use serde::Serialize;
use sha2::{Digest, Sha256};
use tokio_util::{sync::CancellationToken, task::TaskTracker};

use super::webhook::sign;
use crate::{
    config::{AgentKind, Config},
    store::{AskStore, ClaimedAnswer},
    util::{Clock, UnixMs, now_secs},
};

/// How long a claim keeps other replicas off a delivery (renewed at every attempt).
pub const LEASE: Duration = Duration::from_secs(30);
/// How long after its answer a delivery is still tried.
pub const PATIENCE: Duration = Duration::from_secs(300);
/// How long one POST may take.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
/// The most undelivered answers one sweep takes up.
const SWEEP_LIMIT: i64 = 100;

/// The body of an answer's POST.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct AnswerDelivery<'a> {
    /// Always `answer`.
    pub kind: &'static str,
    pub turn_id: &'a str,
    pub profile: &'a str,
    pub ask_id: &'a str,
    /// The answer; `null` for a timeout without a default.
    pub answer: Option<&'a str>,
    /// The presser's open_id; `null` for a timeout.
    pub answered_by: Option<&'a str>,
    pub timed_out: bool,
    /// Unix ms it was answered (or timed out).
    pub answered_at: i64,
}

impl<'a> AnswerDelivery<'a> {
    /// The body for a claimed answer.
    pub fn of(c: &'a ClaimedAnswer) -> Self {
        Self {
            kind: "answer",
            turn_id: &c.ask.turn_id,
            profile: &c.profile,
            ask_id: &c.ask.ask_id,
            answer: c.ask.answer.as_deref(),
            answered_by: c.ask.answered_by.as_deref(),
            timed_out: c.ask.timed_out,
            answered_at: c.ask.answered_at.map(UnixMs::millis).unwrap_or_default(),
        }
    }
}

/// The `webhook-id` of an answer: the same for every attempt and every replica.
pub fn delivery_id(turn_id: &str, ask_id: &str) -> String {
    let mut h = Sha256::new();
    h.update(turn_id.as_bytes());
    h.update([0]);
    h.update(ask_id.as_bytes());
    format!("answer_{}", hex::encode(&h.finalize()[..16]))
}

/// What one attempt came to.
enum Attempt {
    /// The agent took it (2xx), or refused it for good (4xx: logged).
    Done,
    /// Worth trying again (no connection, a timeout, a 5xx).
    Again(String),
}

/// Delivers answers to the agents.
pub struct AnswerSender {
    http: reqwest::Client,
    config: Arc<Config>,
    store: Arc<dyn AskStore>,
    clock: Arc<dyn Clock>,
    /// This replica, as a claim's owner.
    owner: String,
    /// Where deliveries run (the shutdown waits for them).
    tasks: TaskTracker,
    /// Ends the deliveries in hand (their claims run out; another start takes them).
    stop: CancellationToken,
    /// The deliveries this replica is working on: a sweep leaves them alone.
    in_hand: Mutex<HashSet<(String, String)>>,
}

impl std::fmt::Debug for AnswerSender {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "AnswerSender({})", self.owner)
    }
}

/// What an [`AnswerSender`] is made of.
pub struct AnswerParts {
    pub http: reqwest::Client,
    pub config: Arc<Config>,
    pub store: Arc<dyn AskStore>,
    pub clock: Arc<dyn Clock>,
    pub tasks: TaskTracker,
    pub stop: CancellationToken,
}

impl AnswerSender {
    /// A sender for the replica `config` names.
    pub fn new(p: AnswerParts) -> Self {
        Self {
            owner: p.config.replica_id(),
            http: p.http,
            config: p.config,
            store: p.store,
            clock: p.clock,
            tasks: p.tasks,
            stop: p.stop,
            in_hand: Mutex::default(),
        }
    }

    fn in_hand(&self) -> std::sync::MutexGuard<'_, HashSet<(String, String)>> {
        self.in_hand.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Starts delivering an answered ask, unless this replica already is.
    pub fn start(self: &Arc<Self>, turn_id: &str, ask_id: &str) {
        let key = (turn_id.to_string(), ask_id.to_string());
        if !self.in_hand().insert(key.clone()) {
            return;
        }
        let me = self.clone();
        self.tasks.spawn(async move {
            me.deliver(&key.0, &key.1).await;
            me.in_hand().remove(&key);
        });
    }

    /// Takes up the undelivered answers whose claims ran out (a replica that stopped, a
    /// restart).
    pub async fn sweep(self: &Arc<Self>) {
        let now = self.clock.now();
        let since = UnixMs(now.millis().saturating_sub(millis(PATIENCE)));
        match self
            .store
            .undelivered_answers(now, since, SWEEP_LIMIT)
            .await
        {
            Ok(pending) => {
                for (turn_id, ask_id) in pending {
                    self.start(&turn_id, &ask_id);
                }
            }
            Err(e) => tracing::debug!(error = %e, "undelivered answers not readable"),
        }
    }

    /// Claims, POSTs and marks one answer, again after a failure while it may.
    async fn deliver(&self, turn_id: &str, ask_id: &str) {
        let mut failures = 0u32;
        loop {
            let now = self.clock.now();
            let until = UnixMs(now.millis().saturating_add(millis(LEASE)));
            let claimed = self
                .store
                .claim_answer_delivery(turn_id, ask_id, &self.owner, now, until)
                .await;
            let why = match claimed {
                // Delivered, its turn ended, or another replica holds it.
                Ok(None) => return,
                Ok(Some(c)) => {
                    let answered = c.ask.answered_at.unwrap_or(now);
                    if now.millis().saturating_sub(answered.millis()) > millis(PATIENCE) {
                        tracing::warn!(
                            turn_id,
                            "an ask's answer was not delivered to the agent in time; given up"
                        );
                        return;
                    }
                    match self.attempt(&c).await {
                        Attempt::Done => {
                            self.mark(turn_id, ask_id).await;
                            return;
                        }
                        Attempt::Again(why) => why,
                    }
                }
                Err(e) => e.reason(),
            };
            failures += 1;
            if failures == 1 {
                tracing::warn!(turn_id, reason = %why, "an ask's answer was not delivered to the agent; trying again");
            }
            tokio::select! {
                () = tokio::time::sleep(pause(failures)) => {}
                () = self.stop.cancelled() => return,
            }
        }
    }

    /// Marks a delivery done.
    async fn mark(&self, turn_id: &str, ask_id: &str) {
        let now = self.clock.now();
        match self
            .store
            .mark_answer_delivered(turn_id, ask_id, &self.owner, now)
            .await
        {
            Ok(true) => tracing::info!(turn_id, "an ask's answer was delivered to the agent"),
            Ok(false) => {
                tracing::warn!(
                    turn_id,
                    "an ask's answer was delivered after its claim ran out"
                )
            }
            Err(e) => {
                tracing::warn!(turn_id, reason = %e.reason(), "an ask's delivery was not recorded: it may be delivered again")
            }
        }
    }

    /// One signed POST of the answer to its profile's agent.
    async fn attempt(&self, c: &ClaimedAnswer) -> Attempt {
        let agent = self
            .config
            .profile(&c.profile)
            .map(|p| &p.agent)
            .filter(|a| a.kind == AgentKind::Webhook);
        let (Some(url), Some(secret)) = (
            agent.and_then(|a| a.url.as_deref()),
            agent.and_then(|a| a.secret.as_ref()),
        ) else {
            tracing::warn!(profile = %c.profile, "an ask was answered for a profile without a webhook agent: nothing to deliver to");
            return Attempt::Done;
        };
        let Ok(body) = serde_json::to_vec(&AnswerDelivery::of(c)) else {
            return Attempt::Done;
        };
        let id = delivery_id(&c.ask.turn_id, &c.ask.ask_id);
        let ts = now_secs().to_string();
        let signature = sign(secret.expose_secret(), &id, &ts, &body);
        let sent = self
            .http
            .post(url)
            .timeout(REQUEST_TIMEOUT)
            .header("content-type", "application/json")
            .header("webhook-id", &id)
            .header("webhook-timestamp", &ts)
            .header("webhook-signature", &signature)
            .body(body);
        let sent = tokio::select! {
            sent = sent.send() => sent,
            () = self.stop.cancelled() => return Attempt::Again("stopping".into()),
        };
        match sent {
            Ok(r) if r.status().is_success() => Attempt::Done,
            Ok(r) if r.status().is_server_error() => {
                Attempt::Again(format!("the agent answered HTTP {}", r.status().as_u16()))
            }
            Ok(r) => {
                tracing::warn!(turn_id = %c.ask.turn_id, status = r.status().as_u16(), "the agent refused an ask's answer; not sent again");
                Attempt::Done
            }
            // Without the URL: it can carry credentials.
            Err(e) => Attempt::Again(e.without_url().to_string()),
        }
    }
}

/// Milliseconds of `d`.
fn millis(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

/// The pause after `failures` failed attempts: 200 ms doubling, at most 10 s.
fn pause(failures: u32) -> Duration {
    let factor = 1u32 << failures.saturating_sub(1).min(6);
    (Duration::from_millis(200) * factor).min(Duration::from_secs(10))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_delivery_id_is_stable_and_names_no_input() {
        let id = delivery_id("turn_1", "q 1/ü");
        assert_eq!(id, delivery_id("turn_1", "q 1/ü"));
        assert_ne!(id, delivery_id("turn_1", "q 2"));
        assert_ne!(delivery_id("turn_1x", ""), delivery_id("turn_1", "x"));
        assert!(
            id.starts_with("answer_") && id.is_ascii() && id.len() == 39,
            "{id}"
        );
    }

    #[test]
    fn the_pause_doubles_up_to_ten_seconds() {
        let pauses: Vec<u128> = (1..=8).map(|f| pause(f).as_millis()).collect();
        assert_eq!(pauses, [200, 400, 800, 1600, 3200, 6400, 10000, 10000]);
    }
}
