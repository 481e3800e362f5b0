//! One conformance suite for the `Store` trait, run against SQLite and Postgres.

use std::sync::Arc;

use feishu_bridge::{
    config::DatabaseConfig,
    store::{self, Finish, InboxStatus, InsertOutcome, NewInboxEvent, Store},
};

use feishu_bridge::{
    context::kinds::{EventType, ItemType, Role},
    util::UnixMs,
};

use crate::{both_backends, support::TestDb};

async fn open(db: &TestDb) -> Arc<dyn Store> {
    let config = DatabaseConfig {
        url: db.url.clone().into(),
        ..DatabaseConfig::default()
    };
    let store = store::open(&config).await.expect("open");
    store.migrate().await.expect("migrate");
    store.migrate().await.expect("migrating twice is a no-op");
    store
}

fn ev(profile: &str, event_id: &str, message_id: Option<&str>) -> NewInboxEvent {
    NewInboxEvent {
        profile: profile.into(),
        event_id: event_id.into(),
        event_type: "im.message.receive_v1".into(),
        message_id: message_id.map(str::to_string),
        payload: format!("{{\"id\":\"{event_id}\"}}"),
        received_at: UnixMs(1_000),
        status: InboxStatus::Pending,
    }
}

use InsertOutcome::{Duplicate as Dup, Inserted as New};

async fn inserts_deduplicate(db: TestDb) {
    let s = open(&db).await;
    let out = s
        .insert_inbox_batch(&[
            ev("a", "e1", Some("m1")),
            ev("a", "e2", None),
            ev("a", "e1", Some("m9")),
        ])
        .await
        .expect("batch");
    assert_eq!(
        out,
        [New, New, Dup],
        "a duplicate inside one batch is caught too"
    );
    let out = s
        .insert_inbox_batch(&[
            ev("a", "e3", Some("m1")), // same message, new event id
            ev("b", "e1", Some("m1")), // other profile: its own namespace
            ev("a", "e4", None),       // no message id never conflicts
            ev("a", "e2", None),       // replayed event id
        ])
        .await
        .expect("batch");
    assert_eq!(out, [Dup, New, New, Dup]);
    assert_eq!(db.count("inbox_events").await, 4);
    let row = s.inbox_event("a", "e1").await.expect("read").expect("row");
    assert_eq!(
        (row.payload.as_str(), row.status, row.attempts),
        ("{\"id\":\"e1\"}", InboxStatus::Pending, 0)
    );
    assert!(s.inbox_event("a", "nope").await.expect("read").is_none());
    s.ping().await.expect("ping");
}
both_backends!(
    inserts_deduplicate_by_event_id_and_message_id,
    inserts_deduplicate
);

async fn claims_follow_status_and_time(db: TestDb) {
    let s = open(&db).await;
    let mut skipped = ev("a", "s1", None);
    skipped.status = InboxStatus::Skipped;
    s.insert_inbox_batch(&[
        ev("a", "e1", None),
        skipped,
        ev("a", "e2", None),
        ev("a", "e3", None),
    ])
    .await
    .expect("insert");

    let first = s
        .claim_inbox("replica-a", UnixMs(2_000), 1_000, 2)
        .await
        .expect("claim");
    let ids: Vec<_> = first.iter().map(|e| e.event_id.as_str()).collect();
    assert_eq!(
        ids,
        ["e1", "e2"],
        "arrival order, skipped rows never claimed"
    );
    assert!(
        first
            .iter()
            .all(|e| e.attempts == 1 && e.status == InboxStatus::Processing)
    );

    let second = s
        .claim_inbox("replica-a", UnixMs(2_000), 1_000, 10)
        .await
        .expect("claim");
    assert_eq!(
        second
            .iter()
            .map(|e| e.event_id.as_str())
            .collect::<Vec<_>>(),
        ["e3"],
        "leased rows are not claimed twice"
    );

    s.finish_inbox(first[0].id, &Finish::Done, UnixMs(2_100))
        .await
        .expect("done");
    s.finish_inbox(
        first[1].id,
        &Finish::Retry {
            error: "boom".into(),
            at: UnixMs(5_000),
        },
        UnixMs(2_100),
    )
    .await
    .expect("retry");
    s.release_inbox(&[second[0].id]).await.expect("release");

    let counts = s.inbox_counts().await.expect("counts");
    assert_eq!(
        (
            counts.pending,
            counts.processing,
            counts.retrying,
            counts.failed
        ),
        (2, 0, 1, 0)
    );

    // e3 was released (attempt not counted); e2 is not due before 5000.
    let third = s
        .claim_inbox("replica-a", UnixMs(2_200), 1_000, 10)
        .await
        .expect("claim");
    assert_eq!(
        third
            .iter()
            .map(|e| (e.event_id.as_str(), e.attempts))
            .collect::<Vec<_>>(),
        [("e3", 1)]
    );

    // A worker that died: its lease (until 3200) runs out and the row comes back.
    let again = s
        .claim_inbox("replica-a", UnixMs(3_300), 10_000, 10)
        .await
        .expect("claim");
    assert_eq!(
        again
            .iter()
            .map(|e| (e.event_id.as_str(), e.attempts))
            .collect::<Vec<_>>(),
        [("e3", 2)]
    );

    let fourth = s
        .claim_inbox("replica-a", UnixMs(5_000), 10_000, 10)
        .await
        .expect("claim");
    assert_eq!(
        fourth
            .iter()
            .map(|e| (e.event_id.as_str(), e.attempts))
            .collect::<Vec<_>>(),
        [("e2", 2)]
    );
    assert_eq!(fourth[0].last_error.as_deref(), Some("boom"));

    s.finish_inbox(
        fourth[0].id,
        &Finish::Failed {
            error: "gave up".into(),
        },
        UnixMs(5_100),
    )
    .await
    .expect("fail");
    let problems = s.inbox_problems(10).await.expect("problems");
    assert_eq!(problems.len(), 1);
    assert_eq!(
        (
            problems[0].event_id.as_str(),
            problems[0].status,
            problems[0].last_error.as_deref()
        ),
        ("e2", InboxStatus::Failed, Some("gave up"))
    );
    let counts = s.inbox_counts().await.expect("counts");
    assert_eq!(
        (counts.pending, counts.processing, counts.failed),
        (0, 1, 1)
    );
}
both_backends!(
    claims_follow_status_leases_and_retry_times,
    claims_follow_status_and_time
);

async fn concurrent_claimers(db: TestDb) {
    let s = open(&db).await;
    let batch: Vec<_> = (0..200).map(|i| ev("a", &format!("e{i}"), None)).collect();
    s.insert_inbox_batch(&batch).await.expect("insert");
    let claim = |s: Arc<dyn Store>| async move {
        let mut mine = Vec::new();
        loop {
            let got = s
                .claim_inbox("replica-a", UnixMs(2_000), 60_000, 7)
                .await
                .expect("claim");
            if got.is_empty() {
                return mine;
            }
            mine.extend(got.into_iter().map(|e| e.id));
        }
    };
    let (a, b, c) = tokio::join!(
        tokio::spawn(claim(s.clone())),
        tokio::spawn(claim(s.clone())),
        tokio::spawn(claim(s.clone()))
    );
    let mut all: Vec<i64> = [a, b, c]
        .into_iter()
        .flat_map(|r| r.expect("task"))
        .collect();
    let claimed = all.len();
    all.sort_unstable();
    all.dedup();
    assert_eq!(
        (claimed, all.len()),
        (200, 200),
        "every event claimed exactly once"
    );
}
both_backends!(
    concurrent_claimers_never_share_an_event,
    concurrent_claimers
);

async fn claims_carry_their_owner(db: TestDb) {
    let s = open(&db).await;
    let batch: Vec<_> = (0..4).map(|i| ev("a", &format!("e{i}"), None)).collect();
    s.insert_inbox_batch(&batch).await.expect("insert");
    let mine = s
        .claim_inbox("me", UnixMs(2_000), 1_000, 2)
        .await
        .expect("claim");
    let theirs = s
        .claim_inbox("them", UnixMs(2_000), 1_000, 2)
        .await
        .expect("claim");
    assert_eq!((mine.len(), theirs.len()), (2, 2));

    // The heartbeat extends only the owner's leases: at 3 500 the others' ran out.
    s.renew_leases(
        "me",
        &[mine[0].id, mine[1].id, theirs[0].id],
        UnixMs(10_000),
    )
    .await
    .expect("renew");
    let due = s
        .claim_inbox("other", UnixMs(3_500), 1_000, 10)
        .await
        .expect("claim");
    let due: Vec<_> = due.iter().map(|e| e.event_id.as_str()).collect();
    assert_eq!(
        due,
        [theirs[0].event_id.as_str(), theirs[1].event_id.as_str()]
    );

    // A restart of "me" takes its claims back at once (SQLite: every claim).
    let back = s.reclaim_inbox("me", UnixMs(4_000)).await.expect("reclaim");
    let expected = match db.kind {
        crate::support::Kind::Sqlite => 4,
        crate::support::Kind::Postgres => 2,
    };
    assert_eq!(back, expected);
    let again = s
        .claim_inbox("me", UnixMs(4_000), 1_000, 10)
        .await
        .expect("claim");
    assert_eq!(again.len() as u64, expected);

    // A database failure does not count towards giving up.
    let e = &again[0];
    s.finish_inbox(
        e.id,
        &Finish::Deferred {
            error: "database error".into(),
            at: UnixMs(4_100),
        },
        UnixMs(4_000),
    )
    .await
    .expect("defer");
    let row = s
        .inbox_event("a", &e.event_id)
        .await
        .expect("read")
        .expect("row");
    assert_eq!(
        (row.status, row.attempts, row.next_attempt_at),
        (InboxStatus::Pending, e.attempts - 1, UnixMs(4_100))
    );
    s.probe_write(UnixMs(4_000))
        .await
        .expect("the database takes writes");
}
both_backends!(
    claims_carry_their_owner_renew_and_come_back_at_restart,
    claims_carry_their_owner
);

fn context_event(message_id: &str, event_type: &str, created_at: i64) -> store::NewContextEvent {
    let created_at = UnixMs(created_at);
    store::NewContextEvent {
        chat_id: "oc_1".into(),
        chat_type: feishu_bridge::protocol::events::ChatType::Group,
        root_msg_id: "om_root".into(),
        thread_id: None,
        message_id: message_id.into(),
        event_type: EventType::parse(event_type).expect("an event type"),
        actor_type: "user".into(),
        actor_id: "ou_a".into(),
        bridge_id: "cli_a".into(),
        bot_profile: "a".into(),
        target_id: None,
        target_name: None,
        session_name: None,
        history_scope: "chat:oc_1".into(),
        text: format!("text of {message_id}"),
        metadata_json: "{}".into(),
        created_at,
        item: ItemType::parse(event_type).map(|item_type| store::NewItem {
            item_type,
            role: Role::Human,
            author_label: "Alice".into(),
            text: format!("text of {message_id}"),
            token_estimate: 3,
            truncated: false,
        }),
    }
}

fn write(events: Vec<store::NewContextEvent>, message_id: &str) -> store::RouteWrite {
    store::RouteWrite {
        verdict: store::NewVerdict {
            profile: "a".into(),
            message_id: message_id.into(),
            chat_id: "oc_1".into(),
            verdict: feishu_bridge::routing::Verdict::Observed,
            reason: feishu_bridge::routing::Reason::NoMention,
            session_key: None,
            created_at: UnixMs(10),
        },
        events,
        session: None,
        names: Vec::new(),
        turn: None,
    }
}

async fn event_log_dedup_and_retention(db: TestDb) {
    let s = open(&db).await;
    s.apply_route(&write(
        vec![context_event("om_old", "human_message", 1_000)],
        "om_old",
    ))
    .await
    .expect("write");
    // The same message recorded twice (at-least-once processing) stays one record; a
    // second type for the same message is its own record.
    s.apply_route(&write(
        vec![context_event("om_new", "topic_root", 9_000)],
        "om_new",
    ))
    .await
    .expect("write");
    s.apply_route(&write(
        vec![
            context_event("om_new", "topic_root", 9_000),
            context_event("om_new", "user_request", 9_000),
        ],
        "om_new",
    ))
    .await
    .expect("write");
    assert_eq!(db.count("thread_context_events").await, 3);
    assert_eq!(
        db.count("thread_context_items").await,
        2,
        "user_request never becomes an item"
    );
    assert_eq!(
        db.count("routing_verdicts").await,
        2,
        "the first verdict stands"
    );

    // Retention: purged as events are written, items with them.
    s.apply_route(&write(
        vec![context_event("om_newer", "human_message", 10_000)],
        "om_newer",
    ))
    .await
    .expect("write");
    s.purge(UnixMs(5_000)).await.expect("purge");
    let left = s
        .thread_events("a", "oc_1", "om_root")
        .await
        .expect("events");
    let ids: Vec<_> = left.iter().map(|e| e.message_id.as_str()).collect();
    assert_eq!(ids, ["om_new", "om_new", "om_newer"]);
    assert_eq!(db.count("thread_context_items").await, 2, "no orphan items");
}
both_backends!(
    event_log_deduplicates_per_message_and_type_and_purges_old_events,
    event_log_dedup_and_retention
);
