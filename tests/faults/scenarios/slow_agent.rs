//! A slow agent behind a rate-limiting Open API. The webhook agent takes seconds per
//! turn; the fake Open API answers HTTP 429 / 99991400 (with `x-ogw-ratelimit-reset`) to
//! a fixed fraction of replies the first time(s) they are tried, and in the long form
//! refuses every reply during a storm. Observed events keep arriving throughout, with
//! @-requests among them.
//!
//! Checks: every callback is answered within the ack bound while turns wait on the agent
//! and on the Open API; every request has one turn, which succeeds, reaches the agent
//! once and is answered by exactly one message (the retries reuse its uuid); the bridge
//! never goes over Feishu's frequency limits.

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
        out_dir,
        report::Report,
    },
};

/// Runs the scenario.
pub async fn run(mode: Mode) {
    let name = "slow_agent";
    let out = out_dir(name);
    let mut report = Report::new(name, out.clone());
    let rate = mode.pick(100.0, 150.0);
    let count = mode.pick(1500, 9000);
    let request_every = mode.pick(25, 20);
    let think = Duration::from_secs(mode.pick(3, 8));
    let refusals = Refusals {
        one_in: mode.pick(3, 2),
        times: mode.pick(1, 2),
        reset_secs: 1,
    };
    report.figure("mode", mode.name());
    report.figure("agent_s", think.as_secs());
    report.figure(
        "refused",
        format!("1in{}x{}", refusals.one_in, refusals.times),
    );

    let data = tempfile::tempdir().expect("temp dir");
    let db_url = format!("sqlite://{}/bridge.db", data.path().display());
    let api = FakeOpenApi::start(refusals).await;
    let agent = FakeAgent::start(think).await;
    let spec = Spec {
        replica: "slow-agent-1".into(),
        db_url: db_url.clone(),
        api_base: api.base.clone(),
        agent: AgentKind::Webhook(agent.url.clone()),
        ack_deadline_ms: ACK_DEADLINE_MS,
        lease_ms: 3000,
    };
    let mut bridge = Bridge::start(&out, spec).await;
    let load = Load::new(std::slice::from_ref(&bridge.base));
    let sending = load.spawn(EventGen::new(16, request_every), rate, count);
    if mode == Mode::Long {
        // A storm a third of the way in: every reply refused for 20 s.
        let third = count / 3;
        load.wait_sent(third, Duration::from_secs(120)).await;
        api.storm(Duration::from_secs(20));
        report.progress(format!("storm from {:.1?}", load.elapsed()));
    }
    let limit = Duration::from_secs(count / rate as u64 + 60);
    let sent = tokio::time::timeout(limit, sending)
        .await
        .expect("the sender finishes")
        .expect("sender task");
    still_running(&mut report, &mut bridge);

    checks::answers(&mut report, &sent, ack_bound(), |_| false);
    let db = Db::Sqlite(db_url);
    let verify = Verify {
        db: &db,
        api: &api,
        agent: Some(&agent),
        interrupted_ok: false,
        drain_limit: Duration::from_secs(mode.pick(90, 600)),
    };
    after_load(&mut report, &load, &sent, verify).await;
    report.figure("agent_most_in_flight", agent.most_in_flight());
    let injected = api
        .counters()
        .injected_429
        .load(std::sync::atomic::Ordering::SeqCst);
    report.check(injected > 0, "the Open API refused some replies", || {
        "no reply was refused: the scenario tested nothing".into()
    });
    still_running(&mut report, &mut bridge);
    stop(&mut report, &mut bridge).await;
    report.finish();
}
