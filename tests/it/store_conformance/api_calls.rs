//! Every replica's Open API calls: a call is recorded only while the app has room in the
//! second and the minute before it, apps do not share windows, and replicas recording
//! at once never go past the limits together.

use std::sync::Arc;

use feishu_bridge::{
    store::{CallLimits, CallRoom, Store},
    util::{ManualClock, UnixMs},
};

use super::{open, open_unmigrated};
use crate::{both_backends, support::TestDb};

const APP: &str = "cli_planner";

fn limits(per_second: u32, per_minute: u32) -> CallLimits {
    CallLimits {
        per_second,
        per_minute,
    }
}

async fn record(s: &dyn Store, app: &str, at: i64, limits: CallLimits) -> CallRoom {
    s.record_call(app, &ManualClock::at(UnixMs(at)), limits)
        .await
        .expect("record")
}

async fn windows(db: TestDb) {
    let s = open(&db).await;
    // A second: three fit, the fourth waits for the first to be a second old.
    let second = limits(3, 100);
    for at in [10_000, 10_200, 10_400] {
        assert_eq!(record(&*s, APP, at, second).await, CallRoom::Taken, "{at}");
    }
    assert_eq!(
        record(&*s, APP, 10_500, second).await,
        CallRoom::FullUntil(UnixMs(11_000))
    );
    assert_eq!(
        record(&*s, "cli_other", 10_500, second).await,
        CallRoom::Taken,
        "another app has its own windows"
    );
    assert_eq!(record(&*s, APP, 11_000, second).await, CallRoom::Taken);

    // A minute: the four calls so far and one more; then full until the oldest is a
    // minute old, across seconds.
    let minute = limits(100, 5);
    assert_eq!(record(&*s, APP, 30_000, minute).await, CallRoom::Taken);
    assert_eq!(
        record(&*s, APP, 40_000, minute).await,
        CallRoom::FullUntil(UnixMs(70_000))
    );
    assert_eq!(
        record(&*s, APP, 70_000, minute).await,
        CallRoom::Taken,
        "the oldest left the minute"
    );
    // A stricter limit for the same app (intermediate calls) counts the same calls.
    assert_eq!(
        record(&*s, APP, 70_100, limits(100, 2)).await,
        CallRoom::FullUntil(UnixMs(70_200))
    );
}
both_backends!(
    a_call_is_recorded_only_within_the_apps_second_and_minute,
    windows
);

async fn racing(db: TestDb) {
    // Two handles on one database, as two replicas have, recording at the same instant.
    let replicas: Vec<Arc<dyn Store>> = vec![open(&db).await, open_unmigrated(&db).await];
    let second = limits(10, 1000);
    let mut tasks = Vec::new();
    for i in 0..60 {
        let s = replicas[i % 2].clone();
        tasks.push(tokio::spawn(async move {
            s.record_call(APP, &ManualClock::at(UnixMs(50_000)), second)
                .await
        }));
    }
    let mut taken = 0;
    for task in tasks {
        match task.await.expect("task").expect("record") {
            CallRoom::Taken => taken += 1,
            CallRoom::FullUntil(at) => assert_eq!(at, UnixMs(51_000)),
        }
    }
    assert_eq!(taken, 10, "together they made exactly the second's limit");
}
both_backends!(
    replicas_recording_at_once_stay_within_the_limits_together,
    racing
);
