//! `kill -9` of one of two replicas on one Postgres while events arrive. Two bridge
//! processes (`replica-1`, `replica-2`, short leases) share a private Postgres; events,
//! @-requests among them, are spread over both; mid-load one is killed and its traffic
//! goes to the other, as a load balancer would send it. The short form kills once and
//! never restarts the victim: the survivor must take over its claimed events and its
//! turns once their leases run out. The long form kills replica-2, restarts it, then
//! kills replica-1 for good.
//!
//! Checks: every answer of a live replica is 200 or 503 within the ack bound (a
//! delivery to the killed one may go unanswered; Feishu retries it, to the survivor);
//! every event is stored, `done`, with one verdict; every request has one turn, which
//! finished (`succeeded`, or `failed` as interrupted with a notice), no turn is left
//! queued or running, each request got exactly one message at the Open API and each turn
//! reached the agent at most once.

use std::time::Duration;

use crate::{
    scenarios::{Verify, after_load, still_running, stop},
    support::{
        ACK_DEADLINE_MS, Mode, ack_bound,
        bridge::{AgentKind, Bridge, Spec},
        checks,
        db::Db,
        events::EventGen,
        fake_agent::FakeAgent,
        fake_openapi::{FakeOpenApi, Refusals},
        load::Load,
        out_dir, out_root,
        pg::PrivatePg,
        report::Report,
    },
};

/// What happens at a point of the load: (share of the events sent, replica, kill or start).
type Step = (f64, usize, bool);

/// Runs the scenario.
pub async fn run(mode: Mode) {
    let name = "replica_kill";
    let out = out_dir(name);
    let mut report = Report::new(name, out.clone());
    let count: u64 = mode.pick(6_000, 50_000);
    let rate = mode.pick(250.0, 600.0);
    let steps: Vec<Step> = mode.pick(
        vec![(0.4, 1, true)],
        vec![(0.3, 1, true), (0.5, 1, false), (0.7, 0, true)],
    );
    report.figure("mode", mode.name());

    let pg = PrivatePg::start_new(&out_root(&out), name).await;
    let api = FakeOpenApi::start(Refusals::default()).await;
    let agent = FakeAgent::start(Duration::from_millis(1000)).await;
    let mut bridges = Vec::new();
    for i in 1..=2 {
        let spec = Spec {
            replica: format!("replica-{i}"),
            db_url: pg.url(),
            api_base: api.base.clone(),
            agent: AgentKind::Webhook(agent.url.clone()),
            ack_deadline_ms: ACK_DEADLINE_MS,
            lease_ms: 2000,
        };
        bridges.push(Bridge::start(&out, spec).await);
    }
    let bases: Vec<String> = bridges.iter().map(|b| b.base.clone()).collect();
    let load = Load::new(&bases);
    let sending = load.spawn(EventGen::new(16, 25), rate, count);

    // (replica, from, to): when each one was down, since the load started.
    let mut down: Vec<(usize, Duration, Duration)> = Vec::new();
    let (mut kills, mut restarts) = (0, 0);
    for (share, i, kill) in &steps {
        let at = (count as f64 * share) as u64;
        if !load.wait_sent(at, Duration::from_secs(180)).await {
            report.check(false, "the load reaches its fault points", || {
                format!("only {} of {at} events sent", load.sent())
            });
            break;
        }
        if *kill {
            let from = load.elapsed();
            bridges[*i].kill9().await;
            load.set_target(*i, None);
            kills += 1;
            report.progress(format!("killed {} at {from:.1?}", bridges[*i].name()));
            down.push((*i, from, Duration::MAX));
        } else {
            bridges[*i].launch().await;
            load.set_target(*i, Some(&bases[*i]));
            restarts += 1;
            let to = load.elapsed();
            report.progress(format!("restarted {} at {to:.1?}", bridges[*i].name()));
            if let Some(d) = down.iter_mut().rev().find(|d| d.0 == *i) {
                d.2 = to;
            }
        }
    }
    report.figure("kills", kills);
    report.figure("restarts", restarts);
    let sent = tokio::time::timeout(Duration::from_secs(count / 100 + 120), sending)
        .await
        .expect("the sender finishes")
        .expect("sender task");

    let live: Vec<usize> = (0..bridges.len())
        .filter(|i| !down.iter().any(|d| d.0 == *i && d.2 == Duration::MAX))
        .collect();
    for &i in &live {
        still_running(&mut report, &mut bridges[i]);
    }
    // A delivery to a replica in the second before it was killed, or while it was down,
    // may go unanswered: its connection died with the process.
    let around_kill = |s: &crate::support::load::Sent| {
        down.iter().any(|(i, from, to)| {
            s.outcome.target == *i
                && s.outcome.sent_at + Duration::from_secs(10) >= *from
                && s.outcome.sent_at <= *to
        })
    };
    checks::answers(&mut report, &sent, ack_bound(), around_kill);

    let db = Db::Pg(pg.url());
    let verify = Verify {
        db: &db,
        api: &api,
        agent: Some(&agent),
        interrupted_ok: true,
        drain_limit: Duration::from_secs(mode.pick(60, 300)),
    };
    after_load(&mut report, &load, &sent, verify).await;
    for &i in &live {
        still_running(&mut report, &mut bridges[i]);
        stop(&mut report, &mut bridges[i]).await;
    }
    report.finish();
}
