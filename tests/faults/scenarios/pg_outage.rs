//! Postgres stopped and started under load. A private cluster (never the machine's
//! shared one) is stopped with `pg_ctl stop -m immediate` while events keep arriving,
//! stays down, and is started again; the bridge is never restarted.
//!
//! Checks: every answer is 200 or 503 and comes within the ack bound, 503s were given
//! while the database was down and 200s came back after it returned; every event
//! answered 200 is stored and processed once, every event answered 503 is acknowledged
//! when Feishu retries it; every @-request (echo agent) gets one turn and one reply; the
//! bridge never exited and stops gracefully.

use std::time::Duration;

use crate::{
    scenarios::{Verify, after_load, still_running, stop},
    support::{
        ACK_DEADLINE_MS, Mode, ack_bound,
        bridge::{AgentKind, Bridge, Spec},
        checks,
        db::Db,
        events::EventGen,
        fake_openapi::{FakeOpenApi, Refusals},
        load::Load,
        out_dir, out_root,
        pg::PrivatePg,
        report::Report,
    },
};

/// Runs the scenario.
pub async fn run(mode: Mode) {
    let name = "pg_outage";
    let out = out_dir(name);
    let mut report = Report::new(name, out.clone());
    let rate = mode.pick(200.0, 300.0);
    let before = Duration::from_secs(mode.pick(5, 20));
    let down = Duration::from_secs(mode.pick(8, 45));
    let after = Duration::from_secs(mode.pick(5, 20));
    let outages = mode.pick(1, 3);
    report.figure("mode", mode.name());
    report.figure("outages", format!("{outages}x{}s", down.as_secs()));

    let pg = PrivatePg::start_new(&out_root(&out), name).await;
    let api = FakeOpenApi::start(Refusals::default()).await;
    let spec = Spec {
        replica: "pg-outage-1".into(),
        db_url: pg.url(),
        api_base: api.base.clone(),
        agent: AgentKind::Echo,
        ack_deadline_ms: ACK_DEADLINE_MS,
        lease_ms: 3000,
    };
    let mut bridge = Bridge::start(&out, spec).await;
    let load = Load::new(std::slice::from_ref(&bridge.base));
    let sending = load.spawn(EventGen::new(16, 50), rate, u64::MAX);

    let mut windows = Vec::new();
    tokio::time::sleep(before).await;
    for _ in 0..outages {
        let down_at = load.elapsed();
        pg.stop_immediate().await;
        report.progress(format!("Postgres stopped at {down_at:.1?}"));
        tokio::time::sleep(down).await;
        pg.start().await;
        let up_at = load.elapsed();
        report.progress(format!("Postgres started at {up_at:.1?}"));
        windows.push((down_at, up_at));
        tokio::time::sleep(after).await;
    }
    load.stop();
    let sent = tokio::time::timeout(Duration::from_secs(60), sending)
        .await
        .expect("the sender stops")
        .expect("sender task");
    still_running(&mut report, &mut bridge);

    checks::answers(&mut report, &sent, ack_bound(), |_| false);
    for (i, (down_at, up_at)) in windows.iter().enumerate() {
        let during = |s: &&crate::support::load::Sent| {
            s.outcome.sent_at >= *down_at && s.outcome.sent_at < *up_at
        };
        let refused = sent
            .iter()
            .filter(during)
            .filter(|s| s.outcome.status == Some(503))
            .count();
        report.check(refused > 0, "503 while Postgres is down", || {
            format!("outage {i}: no 503 between {down_at:?} and {up_at:?}")
        });
        let back = sent
            .iter()
            .filter(|s| s.outcome.sent_at >= *up_at && s.outcome.status == Some(200))
            .map(|s| s.outcome.sent_at)
            .min();
        report.check(back.is_some(), "200s again once Postgres is back", || {
            format!("outage {i}: no 200 after {up_at:?}")
        });
        if let Some(back) = back {
            report.figure(
                &format!("back_after_ms_{i}"),
                back.saturating_sub(*up_at).as_millis(),
            );
        }
    }

    let db = Db::Pg(pg.url());
    let verify = Verify {
        db: &db,
        api: &api,
        agent: None,
        interrupted_ok: false,
        drain_limit: Duration::from_secs(mode.pick(60, 300)),
    };
    after_load(&mut report, &load, &sent, verify).await;
    still_running(&mut report, &mut bridge);
    report.figure("bridge_starts", bridge.starts);
    stop(&mut report, &mut bridge).await;
    report.finish();
}
