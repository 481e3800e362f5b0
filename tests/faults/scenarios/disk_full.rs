//! The disk fills under SQLite. The database lives on a tmpfs (64 MiB; 1 GiB in the
//! long form, as the database itself grows by about 4 KB per event); under load a
//! ballast file takes every free byte, so SQLite's next growth (WAL, checkpoint, the
//! file itself) meets a real ENOSPC. The disk stays full for a while, then the ballast is
//! deleted; the bridge is never restarted.
//!
//! Checks: answers are 200 or 503 (never 200 for an event not stored: every 200 is found
//! in the database afterwards), within the ack bound; 503s and a failing `/readyz` while
//! full; the bridge never exited; once there is room the worker resumes by itself and
//! every event, those Feishu retried included, is processed once.

use std::time::{Duration, Instant};

use crate::{
    scenarios::{Verify, after_load, still_running, stop},
    support::{
        ACK_DEADLINE_MS, Mode, ack_bound,
        bridge::{AgentKind, Bridge, Spec},
        checks,
        db::Db,
        disk::SmallDisk,
        events::EventGen,
        fake_openapi::{FakeOpenApi, Refusals},
        load::Load,
        out_dir,
        report::Report,
    },
};

/// Runs the scenario.
pub async fn run(mode: Mode) {
    let name = "disk_full";
    let out = out_dir(name);
    let mut report = Report::new(name, out.clone());
    let rate = mode.pick(200.0, 200.0);
    let before = Duration::from_secs(mode.pick(4, 15));
    let full_for = Duration::from_secs(mode.pick(8, 60));
    let after = Duration::from_secs(mode.pick(5, 20));
    let cycles = mode.pick(1, 3);
    report.figure("mode", mode.name());

    let disk = match SmallDisk::mount(mode.pick(64, 1024)).await {
        Ok(d) => d,
        Err(e) => {
            report.check(false, "a small file system can be mounted", || e);
            return report.finish();
        }
    };
    let db_url = format!("sqlite://{}/bridge.db", disk.path().display());
    let api = FakeOpenApi::start(Refusals::default()).await;
    let spec = Spec {
        replica: "disk-full-1".into(),
        db_url: db_url.clone(),
        api_base: api.base.clone(),
        agent: AgentKind::Echo,
        ack_deadline_ms: ACK_DEADLINE_MS,
        lease_ms: 3000,
    };
    let mut bridge = Bridge::start(&out, spec).await;
    let load = Load::new(std::slice::from_ref(&bridge.base));
    let sending = load.spawn(EventGen::new(16, 50), rate, u64::MAX);

    tokio::time::sleep(before).await;
    let (mut first_503_ms, mut readyz_full, mut windows) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..cycles {
        let refused_before = load.unavailable();
        let full_at = load.elapsed();
        let ballast = disk.fill();
        report.progress(format!(
            "disk filled at {full_at:.1?} ({} MiB ballast, {:?} bytes free)",
            ballast >> 20,
            disk.free_bytes().await
        ));
        // Full until the first 503 shows (bounded), then for `full_for` more.
        let waited = Instant::now();
        while load.unavailable() == refused_before && waited.elapsed() < Duration::from_secs(30) {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        first_503_ms.push(waited.elapsed().as_millis());
        let until = Instant::now() + full_for;
        let mut readyz = Vec::new();
        while Instant::now() < until {
            readyz.push(bridge.get_status("/readyz").await);
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
        readyz_full.push(readyz.contains(&Some(503)));
        disk.make_room();
        let room_at = load.elapsed();
        report.progress(format!("room again at {room_at:.1?}"));
        windows.push((full_at, room_at));
        tokio::time::sleep(after).await;
    }
    load.stop();
    let sent = tokio::time::timeout(Duration::from_secs(60), sending)
        .await
        .expect("the sender stops")
        .expect("sender task");
    still_running(&mut report, &mut bridge);

    checks::answers(&mut report, &sent, ack_bound(), |_| false);
    report.figure(
        "first_503_after_fill_ms",
        format!("{first_503_ms:?}").replace(' ', ""),
    );
    for (i, (full_at, room_at)) in windows.iter().enumerate() {
        let refused = sent
            .iter()
            .filter(|s| s.outcome.sent_at >= *full_at && s.outcome.sent_at < *room_at)
            .filter(|s| s.outcome.status == Some(503))
            .count();
        report.check(refused > 0, "503 while the disk is full", || {
            format!(
                "full period {i}: no 503 in {:?}",
                room_at.saturating_sub(*full_at)
            )
        });
        let back = sent
            .iter()
            .filter(|s| s.outcome.sent_at >= *room_at && s.outcome.status == Some(200))
            .map(|s| s.outcome.sent_at)
            .min();
        report.check(back.is_some(), "200s again once there is room", || {
            format!("full period {i}: no 200 after {room_at:?}")
        });
        if let Some(back) = back {
            report.figure(
                &format!("back_after_ms_{i}"),
                back.saturating_sub(*room_at).as_millis(),
            );
        }
        report.check(
            readyz_full[i],
            "/readyz fails while the disk is full",
            || format!("full period {i}: /readyz never answered 503"),
        );
    }

    let db = Db::Sqlite(db_url);
    let verify = Verify {
        db: &db,
        api: &api,
        agent: None,
        interrupted_ok: false,
        drain_limit: Duration::from_secs(mode.pick(60, 300)),
    };
    after_load(&mut report, &load, &sent, verify).await;
    report.check(
        bridge.get_status("/readyz").await == Some(200),
        "/readyz passes once there is room",
        || "it did not answer 200".into(),
    );
    still_running(&mut report, &mut bridge);
    stop(&mut report, &mut bridge).await;
    drop(disk);
    report.finish();
}
