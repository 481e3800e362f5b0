//! How deep the inbox is (`/status`, `/metrics`), and how its rare rows are read.

use feishu_bridge::{
    store::{ClaimLimits, Finish, InboxCounts, NewInboxEvent, Store},
    util::UnixMs,
};

use super::{ev, open};
use crate::{
    both_backends,
    support::{Kind, TestDb},
};

/// A pending event of `profile`, received at `at`.
fn at(profile: &str, event_id: &str, at: i64) -> NewInboxEvent {
    NewInboxEvent {
        received_at: UnixMs(at),
        ..ev(profile, event_id, None)
    }
}

/// Claims `n` chats' events, one each, at 2 000: (event id, row id).
async fn claim(s: &dyn Store, n: usize) -> Vec<(String, i64)> {
    let limits = ClaimLimits {
        chats: i64::try_from(n).expect("small"),
        per_chat: 1,
    };
    let got = s
        .claim_inbox("me", UnixMs(2_000), 60_000, limits, None)
        .await
        .expect("claim");
    got.iter()
        .map(|e| (e.event.event_id.clone(), e.id))
        .collect()
}

async fn depth_in_one_read(db: TestDb) {
    let s = open(&db).await;
    let batch = [
        at("a", "a1", 1_500),
        at("a", "a2", 1_200),
        at("b", "b1", 1_300),
        at("b", "b2", 1_400),
        at("c", "c1", 1_100),
    ];
    s.insert_inbox_batch(&batch).await.expect("insert");
    let ids = claim(&*s, 5).await;
    let id = |event: &str| -> i64 {
        ids.iter()
            .find(|(e, _)| e == event)
            .map(|(_, id)| *id)
            .expect("claimed")
    };
    let error = || "agent said no".to_string();
    // c1 failed for good, a2 is done, b1 waits for a retry; b2 and a1 stay in hand.
    s.finish_inbox(
        &[id("c1")],
        &Finish::Failed { error: error() },
        UnixMs(2_100),
    )
    .await
    .expect("fail");
    s.finish_inbox(&[id("a2")], &Finish::Done, UnixMs(2_100))
        .await
        .expect("done");
    let retry = Finish::Retry {
        error: error(),
        at: UnixMs(9_000),
    };
    s.finish_inbox(&[id("b1")], &retry, UnixMs(2_100))
        .await
        .expect("retry");

    let depth = s.inbox_depth().await.expect("depth");
    let counts = InboxCounts {
        pending: 1,
        processing: 2,
        failed: 1,
        retrying: 1,
    };
    assert_eq!(depth.counts, counts);
    assert_eq!(s.inbox_counts().await.expect("counts"), counts);
    let backlog: Vec<(&str, i64, Option<UnixMs>)> = depth
        .backlog
        .iter()
        .map(|b| (b.profile.as_str(), b.depth, b.oldest_received_at))
        .collect();
    assert_eq!(
        backlog,
        [("a", 1, Some(UnixMs(1_500))), ("b", 2, Some(UnixMs(1_300)))],
        "pending and in hand, per profile; done and failed rows are not a backlog"
    );
}
both_backends!(
    the_counts_and_the_backlog_come_from_one_read,
    depth_in_one_read
);

/// The problems list and the look-up of expired leases, as the store writes them.
const PROBLEMS: &str = "SELECT id, profile, event_id, event_type, status, attempts, last_error \
     FROM inbox_events WHERE status = 'failed' OR (status = 'pending' AND attempts > 0) \
     ORDER BY id DESC LIMIT 10";
const EXPIRE: &str = "UPDATE inbox_events \
     SET status = 'pending', lease_until = NULL, lease_owner = NULL \
     WHERE status = 'processing' AND lease_until < 5000";

async fn rare_rows_by_index(db: TestDb) {
    let s = open(&db).await;
    let batch: Vec<NewInboxEvent> = (0..300).map(|i| ev("a", &format!("e{i}"), None)).collect();
    s.insert_inbox_batch(&batch).await.expect("insert");
    // A drain in progress: every event in hand, its lease running until 62 000.
    assert_eq!(claim(&*s, 300).await.len(), 300);
    if db.kind == Kind::Postgres {
        db.exec(&["ANALYZE inbox_events"]).await;
    }
    let problems = db.plan(PROBLEMS).await;
    let expire = db.plan(EXPIRE).await;
    match db.kind {
        Kind::Postgres => {
            assert!(
                problems.contains("inbox_events_problems"),
                "the problems list reads its own index, not every row:\n{problems}"
            );
            assert!(
                expire.contains("inbox_events_leases"),
                "expired leases are found by their lease end:\n{expire}"
            );
        }
        Kind::Sqlite => {
            for plan in [&problems, &expire] {
                assert!(
                    plan.contains("USING INDEX inbox_events_status") && !plan.contains("SCAN"),
                    "read through the status index, not every row:\n{plan}"
                );
            }
        }
    }
}
both_backends!(
    failed_rows_and_expired_leases_are_read_through_an_index,
    rare_rows_by_index
);
