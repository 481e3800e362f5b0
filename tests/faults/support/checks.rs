//! The invariants every scenario checks, each by name: how the callbacks were answered
//! (only 200 or 503, within the ack bound), what the database holds for every event
//! (stored, done, one verdict, one record) and for every @-request (one turn, finished,
//! one reply at the Open API, one agent call).

use std::{
    collections::HashMap,
    sync::Arc,
    time::{Duration, Instant},
};

use tokio::task::JoinSet;

use super::{
    db::Snapshot,
    events::Event,
    fake_agent::FakeAgent,
    fake_openapi::FakeOpenApi,
    load::{Load, Sent},
    report::{Report, some},
};

/// The answers to one load, tallied.
#[derive(Debug, Default)]
pub struct Tally {
    /// Deliveries.
    pub sent: usize,
    /// Answered 200.
    pub ok: usize,
    /// Answered 503.
    pub unavailable: usize,
    /// No answer at all.
    pub no_answer: usize,
    /// Any other status: (seq, status).
    pub other: Vec<(u64, u16)>,
    /// Slowest answer.
    pub max_latency: Duration,
    /// 99th percentile answer.
    pub p99: Duration,
}

/// Tallies the answers.
pub fn tally(sent: &[Sent]) -> Tally {
    let mut t = Tally {
        sent: sent.len(),
        ..Tally::default()
    };
    let mut latencies = Vec::with_capacity(sent.len());
    for s in sent {
        match s.outcome.status {
            Some(200) => t.ok += 1,
            Some(503) => t.unavailable += 1,
            Some(other) => t.other.push((s.event.seq, other)),
            None => t.no_answer += 1,
        }
        if s.outcome.status.is_some() {
            latencies.push(s.outcome.latency);
        }
    }
    latencies.sort();
    t.max_latency = latencies.last().copied().unwrap_or_default();
    t.p99 = latencies
        .get(latencies.len().saturating_mul(99) / 100)
        .or(latencies.last())
        .copied()
        .unwrap_or_default();
    t
}

/// Checks and reports the answers: 200 or 503 only, each within `bound`, an answer to
/// every delivery unless `may_go_unanswered` says its bridge was killed under it.
pub fn answers(
    report: &mut Report,
    sent: &[Sent],
    bound: Duration,
    may_go_unanswered: impl Fn(&Sent) -> bool,
) -> Tally {
    let t = tally(sent);
    report.figure("sent", t.sent);
    report.figure("acked", t.ok);
    report.figure("503", t.unavailable);
    report.figure("no_answer", t.no_answer);
    report.figure("max_ack_ms", t.max_latency.as_millis());
    report.figure("p99_ack_ms", t.p99.as_millis());
    report.check(t.other.is_empty(), "answers are 200 or 503", || {
        let seen: Vec<String> = t.other.iter().map(|(s, c)| format!("#{s}: {c}")).collect();
        some(&seen)
    });
    let slow: Vec<String> = sent
        .iter()
        .filter(|s| s.outcome.status.is_some() && s.outcome.latency > bound)
        .map(|s| format!("#{} {} ms", s.event.seq, s.outcome.latency.as_millis()))
        .collect();
    report.check(slow.is_empty(), "every answer within the ack bound", || {
        format!(
            "{} over {} ms: {}",
            slow.len(),
            bound.as_millis(),
            some(&slow)
        )
    });
    let lost: Vec<String> = sent
        .iter()
        .filter(|s| s.outcome.status.is_none() && !may_go_unanswered(s))
        .map(|s| {
            format!(
                "#{} to {} at {:?} after {:?} ({})",
                s.event.seq,
                s.outcome.target,
                s.outcome.sent_at,
                s.outcome.latency,
                s.outcome.error.as_deref().unwrap_or("?")
            )
        })
        .collect();
    report.check(lost.is_empty(), "every delivery answered", || {
        format!("{} without an answer: {}", lost.len(), some(&lost))
    });
    t
}

/// Delivers every event that had no 200 again, as Feishu retries it (up to 3 times,
/// a second apart; 16 at a time; all within `limit`); every one must then be answered
/// 200. The events, all acknowledged.
pub async fn redeliver(
    report: &mut Report,
    load: &Arc<Load>,
    sent: &[Sent],
    limit: Duration,
) -> Vec<Event> {
    let deadline = Instant::now() + limit;
    let again: Vec<Event> = sent
        .iter()
        .filter(|s| s.outcome.status != Some(200))
        .map(|s| s.event.clone())
        .collect();
    let mut running = JoinSet::new();
    for chunk in again.chunks(again.len().div_ceil(16).max(1)) {
        let (load, chunk) = (load.clone(), chunk.to_vec());
        running.spawn(async move {
            let mut results = Vec::new();
            for e in chunk {
                let mut last = None;
                for attempt in 0..3 {
                    if Instant::now() >= deadline {
                        break;
                    }
                    if attempt > 0 {
                        tokio::time::sleep(Duration::from_secs(1)).await;
                    }
                    let o = load.redeliver(&e).await;
                    last = Some(o.clone());
                    if o.status == Some(200) {
                        break;
                    }
                }
                results.push((e.seq, last));
            }
            results
        });
    }
    let (mut stored_before, mut refused) = (0usize, Vec::new());
    while let Some(done) = running.join_next().await {
        for (seq, last) in done.expect("redelivery task") {
            match last {
                Some(o) if o.status == Some(200) => stored_before += usize::from(o.duplicate),
                Some(o) => refused.push(format!("#{seq} ({:?})", o.status)),
                None => refused.push(format!("#{seq} (not retried within {limit:?})")),
            }
        }
    }
    report.figure("redelivered", again.len());
    report.figure("stored_before_retry", stored_before);
    report.check(
        refused.is_empty(),
        "a retried event is acknowledged",
        || some(&refused),
    );
    sent.iter().map(|s| s.event.clone()).collect()
}

/// Every event: in the inbox, `done`, one verdict, one thread record. Reports
/// `processed` and returns the duplicates found.
pub fn processed(report: &mut Report, snap: &Snapshot, events: &[Event]) -> usize {
    let (mut missing, mut unfinished, mut dup) = (Vec::new(), Vec::new(), Vec::new());
    let mut done = 0usize;
    let mut duplicates = 0usize;
    for e in events {
        let Some((status, _)) = snap.inbox.get(&e.event_id) else {
            missing.push(format!("#{}", e.seq));
            continue;
        };
        let verdicts = snap.verdicts.get(&e.message_id).copied().unwrap_or(0);
        let records = snap.records.get(&e.message_id).copied().unwrap_or(0);
        if status != "done" || verdicts == 0 || records == 0 {
            unfinished.push(format!("#{} {status} v{verdicts} r{records}", e.seq));
        } else {
            done += 1;
        }
        if verdicts > 1 || records > 1 {
            duplicates += (verdicts.max(1) + records.max(1) - 2) as usize;
            dup.push(format!("#{} v{verdicts} r{records}", e.seq));
        }
    }
    report.figure("processed", done);
    report.check(
        missing.is_empty(),
        "every acknowledged event is stored",
        || format!("{} missing: {}", missing.len(), some(&missing)),
    );
    report.check(
        unfinished.is_empty(),
        "every stored event is processed",
        || format!("{} not done: {}", unfinished.len(), some(&unfinished)),
    );
    report.check(dup.is_empty(), "every event processed once", || some(&dup));
    duplicates
}

/// Every @-request: exactly one turn, finished (`succeeded`, or `failed` as interrupted
/// when `interrupted_ok`), exactly one message created for it at the Open API, at most
/// one agent call for its turn; the Open API's limits kept. The duplicates found.
pub fn turns(
    report: &mut Report,
    snap: &Snapshot,
    requests: &[&Event],
    api: &FakeOpenApi,
    agent: Option<&FakeAgent>,
    interrupted_ok: bool,
) -> usize {
    let mut by_message: HashMap<&str, Vec<&super::db::TurnRow>> = HashMap::new();
    for t in &snap.turns {
        by_message.entry(t.message_id.as_str()).or_default().push(t);
    }
    let created = api.created();
    let mut replies: HashMap<&str, Vec<String>> = HashMap::new();
    for c in &created {
        let what = format!("{} (uuid {})", c.id, c.uuid);
        replies.entry(c.target.as_str()).or_default().push(what);
    }
    let calls = agent.map(FakeAgent::calls).unwrap_or_default();
    let (mut no_turn, mut extra_turns, mut unfinished, mut no_reply, mut extra_replies) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let (mut succeeded, mut interrupted, mut rerun) = (0usize, 0usize, Vec::new());
    for e in requests {
        let rows = by_message
            .get(e.message_id.as_str())
            .map_or(&[][..], Vec::as_slice);
        match rows.len() {
            0 => no_turn.push(format!("#{}", e.seq)),
            1 => {}
            n => extra_turns.push(format!("#{} has {n}", e.seq)),
        }
        for t in rows {
            let n_calls = calls.get(&t.turn_id).copied().unwrap_or(0);
            if n_calls > 1 {
                rerun.push(format!("{} x{n_calls}", t.turn_id));
            }
            let error = t.error.as_deref().unwrap_or("");
            match t.state.as_str() {
                "succeeded" => succeeded += 1,
                "failed" if interrupted_ok && error.starts_with("interrupted") => interrupted += 1,
                state => unfinished.push(format!("#{} {state} {error}", e.seq)),
            }
        }
        match replies
            .get(e.message_id.as_str())
            .map_or(&[][..], Vec::as_slice)
        {
            [] => no_reply.push(format!("#{}", e.seq)),
            [_] => {}
            many => extra_replies.push(format!("#{}: {}", e.seq, many.join(", "))),
        }
    }
    report.figure("requests", requests.len());
    report.figure("turns_succeeded", succeeded);
    if interrupted_ok {
        report.figure("turns_interrupted", interrupted);
    }
    report.figure("replies", created.len());
    let c = api.counters();
    let load = |a: &std::sync::atomic::AtomicU64| a.load(std::sync::atomic::Ordering::SeqCst);
    report.figure("injected_429", load(&c.injected_429));
    report.check(no_turn.is_empty(), "every request has a turn", || {
        some(&no_turn)
    });
    report.check(extra_turns.is_empty(), "every request has one turn", || {
        some(&extra_turns)
    });
    report.check(unfinished.is_empty(), "every turn finished", || {
        format!("{} not finished: {}", unfinished.len(), some(&unfinished))
    });
    report.check(no_reply.is_empty(), "every request is answered", || {
        format!("{} without a reply: {}", no_reply.len(), some(&no_reply))
    });
    report.check(extra_replies.is_empty(), "one reply per request", || {
        format!(
            "{} with more: {}",
            extra_replies.len(),
            some(&extra_replies)
        )
    });
    report.check(
        rerun.is_empty(),
        "every turn reaches the agent once",
        || some(&rerun),
    );
    let (per_sec, per_min) = (load(&c.over_per_sec), load(&c.over_per_min));
    report.check(
        per_sec + per_min == 0,
        "the Open API's limits are kept",
        || format!("{per_sec} calls over 50 in a second, {per_min} over 1000 in a minute"),
    );
    report.check(
        load(&c.early_retries) == 0,
        "a 429 is retried after its x-ogw-ratelimit-reset",
        || format!("{} retries came early", load(&c.early_retries)),
    );
    report.check(
        load(&c.unexpected) == 0,
        "only known Open API calls",
        || format!("{} calls to unknown endpoints", load(&c.unexpected)),
    );
    if let Some(a) = agent {
        report.check(a.bad_signatures() == 0, "agent calls are signed", || {
            format!("{} bad signatures", a.bad_signatures())
        });
    }
    extra_turns.len() + extra_replies.len() + rerun.len()
}
