//! The durable inbox: group-committed inserts, claims with owners and leases, outcomes.

use std::sync::Arc;

use feishu_bridge::{
    store::{
        ClaimLimits, Finish, InboxCounts, InboxEvent, InboxStatus, InsertOutcome, NewInboxEvent,
        Store, free_chats_query,
    },
    util::UnixMs,
};

use super::{ev, open};
use crate::{
    both_backends,
    support::{Kind, TestDb},
};

use InsertOutcome::{Duplicate as Dup, Inserted as New};

/// Claims up to `limit` events for `owner` at `now`, from as many chats.
async fn claim(s: &dyn Store, owner: &str, now: i64, lease_ms: i64, limit: i64) -> Vec<InboxEvent> {
    let limits = ClaimLimits {
        chats: limit,
        per_chat: limit,
    };
    s.claim_inbox(owner, UnixMs(now), lease_ms, limits, None)
        .await
        .expect("claim")
}

/// Stores pending events of profile `a`, received at 1 000.
async fn insert(s: &dyn Store, event_ids: &[&str]) {
    let events: Vec<_> = event_ids.iter().map(|id| ev("a", id, None)).collect();
    s.insert_inbox_batch(&events).await.expect("insert");
}

/// Each event's id and attempts.
fn attempts(events: &[InboxEvent]) -> Vec<(&str, i64)> {
    events
        .iter()
        .map(|e| (e.event.event_id.as_str(), e.attempts))
        .collect()
}

/// One inbox row, which must exist.
async fn row(s: &dyn Store, profile: &str, event_id: &str) -> InboxEvent {
    s.inbox_event(profile, event_id)
        .await
        .expect("read")
        .expect("row")
}

/// Records how an attempt ended, at 2 100.
async fn finish(s: &dyn Store, id: i64, finish: Finish) {
    s.finish_inbox(&[id], &finish, UnixMs(2_100))
        .await
        .expect("finish");
}

fn retry(error: &str, at: i64) -> Finish {
    Finish::Retry {
        error: error.into(),
        at: UnixMs(at),
    }
}

fn failed(error: &str) -> Finish {
    Finish::Failed {
        error: error.into(),
    }
}

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
        (row.event.payload.as_str(), row.event.status, row.attempts),
        ("{\"id\":\"e1\"}", InboxStatus::Pending, 0)
    );
    assert!(s.inbox_event("a", "nope").await.expect("read").is_none());
    // A group commit's statement has a power-of-two number of rows, the last event
    // repeated: five new events go in once each, the repeats leave nothing.
    let five: Vec<_> = ["e5", "e6", "e7", "e8", "e9"]
        .iter()
        .map(|id| ev("a", id, None))
        .collect();
    let out = s.insert_inbox_batch(&five).await.expect("batch");
    assert_eq!(out, [New, New, New, New, New]);
    assert_eq!(db.count("inbox_events").await, 9);
    s.ping().await.expect("ping");
}
both_backends!(
    inserts_deduplicate_by_event_id_and_message_id,
    inserts_deduplicate
);

async fn claims_follow_status_and_time(db: TestDb) {
    let s = open(&db).await;
    let skipped = NewInboxEvent {
        status: InboxStatus::Skipped,
        ..ev("a", "s1", None)
    };
    s.insert_inbox_batch(&[
        ev("a", "e1", None),
        skipped,
        ev("a", "e2", None),
        ev("a", "e3", None),
    ])
    .await
    .expect("insert");

    let first = claim(&*s, "replica-a", 2_000, 1_000, 2).await;
    assert_eq!(
        attempts(&first),
        [("e1", 1), ("e2", 1)],
        "arrival order, skipped rows never claimed"
    );
    assert!(
        first
            .iter()
            .all(|e| e.event.status == InboxStatus::Processing)
    );

    let second = claim(&*s, "replica-a", 2_000, 1_000, 10).await;
    assert_eq!(
        attempts(&second),
        [("e3", 1)],
        "leased rows are not claimed twice"
    );

    s.finish_inbox(&[first[0].id], &Finish::Done, UnixMs(2_100))
        .await
        .expect("done");
    s.finish_inbox(&[first[1].id], &retry("boom", 5_000), UnixMs(2_100))
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
    let third = claim(&*s, "replica-a", 2_200, 1_000, 10).await;
    assert_eq!(attempts(&third), [("e3", 1)]);

    // A worker that died: its lease (until 3200) runs out and the row comes back.
    let again = claim(&*s, "replica-a", 3_300, 10_000, 10).await;
    assert_eq!(attempts(&again), [("e3", 2)]);

    let fourth = claim(&*s, "replica-a", 5_000, 10_000, 10).await;
    assert_eq!(attempts(&fourth), [("e2", 2)]);
    assert_eq!(fourth[0].last_error.as_deref(), Some("boom"));

    s.finish_inbox(&[fourth[0].id], &failed("gave up"), UnixMs(5_100))
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
                .claim_inbox(
                    "replica-a",
                    UnixMs(2_000),
                    60_000,
                    ClaimLimits {
                        chats: 7,
                        per_chat: 7,
                    },
                    None,
                )
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
    let mine = claim(&*s, "me", 2_000, 1_000, 2).await;
    let theirs = claim(&*s, "them", 2_000, 1_000, 2).await;
    assert_eq!((mine.len(), theirs.len()), (2, 2));

    // The heartbeat extends only the owner's leases: at 3 500 the others' ran out.
    s.renew_leases(
        "me",
        &[mine[0].id, mine[1].id, theirs[0].id],
        UnixMs(10_000),
    )
    .await
    .expect("renew");
    let due = claim(&*s, "other", 3_500, 1_000, 10).await;
    let due: Vec<_> = due.iter().map(|e| e.event.event_id.as_str()).collect();
    assert_eq!(
        due,
        [
            theirs[0].event.event_id.as_str(),
            theirs[1].event.event_id.as_str()
        ]
    );

    // A restart of "me" takes its claims back at once (SQLite: every claim).
    let back = s.reclaim_inbox("me", UnixMs(4_000)).await.expect("reclaim");
    let expected = match db.kind {
        Kind::Sqlite => 4,
        Kind::Postgres => 2,
    };
    assert_eq!(back, expected);
    let again = claim(&*s, "me", 4_000, 1_000, 10).await;
    assert_eq!(again.len() as u64, expected);

    // A database failure does not count towards giving up.
    let e = &again[0];
    s.finish_inbox(
        &[e.id],
        &Finish::Deferred {
            error: "database error".into(),
            at: UnixMs(4_100),
        },
        UnixMs(4_000),
    )
    .await
    .expect("defer");
    let stored = row(&*s, "a", &e.event.event_id).await;
    assert_eq!(
        (stored.event.status, stored.attempts, stored.next_attempt_at),
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

async fn stored_events_read_back_whole(db: TestDb) {
    let s = open(&db).await;
    let none = s.insert_inbox_batch(&[]).await.expect("empty batch");
    assert!(none.is_empty());
    assert_eq!(
        db.count("inbox_events").await,
        0,
        "an empty batch writes nothing"
    );
    let other = NewInboxEvent {
        event_type: "im.chat.member.bot.added_v1".into(),
        received_at: UnixMs(1_500),
        status: InboxStatus::Skipped,
        ..ev("b", "e1", None)
    };
    let out = s
        .insert_inbox_batch(&[ev("a", "e1", Some("m1")), other])
        .await
        .expect("batch");
    assert_eq!(out, [New, New]);
    let a = row(&*s, "a", "e1").await;
    let expected = InboxEvent {
        id: a.id,
        event: NewInboxEvent {
            profile: "a".into(),
            event_id: "e1".into(),
            event_type: "im.message.receive_v1".into(),
            message_id: Some("m1".into()),
            chat_key: "oc_e1".into(),
            payload: "{\"id\":\"e1\"}".into(),
            received_at: UnixMs(1_000),
            status: InboxStatus::Pending,
        },
        attempts: 0,
        last_error: None,
        // Due at once.
        next_attempt_at: UnixMs(1_000),
    };
    assert_eq!(a, expected);
    let b = row(&*s, "b", "e1").await;
    assert_eq!(
        (
            b.event.event_type.as_str(),
            b.event.message_id.as_deref(),
            b.event.status,
            b.next_attempt_at
        ),
        (
            "im.chat.member.bot.added_v1",
            None,
            InboxStatus::Skipped,
            UnixMs(1_500)
        )
    );
    assert!(b.id > a.id, "row ids follow arrival");
    let elsewhere = s.inbox_event("c", "e1").await.expect("read");
    assert!(elsewhere.is_none(), "event ids are per profile");
}
both_backends!(
    a_stored_event_reads_back_whole_under_its_profile,
    stored_events_read_back_whole
);

async fn duplicates_reserve_nothing(db: TestDb) {
    let s = open(&db).await;
    let out = s
        .insert_inbox_batch(&[ev("a", "e1", Some("m1")), ev("a", "e2", Some("m1"))])
        .await
        .expect("batch");
    assert_eq!(out, [New, Dup], "a message id repeated inside one batch");
    let e2 = s.inbox_event("a", "e2").await.expect("read");
    assert!(e2.is_none(), "the duplicate created nothing");

    // A replayed event id with another message id: the stored row stays whole, and the
    // refused row's message id is not taken.
    let out = s
        .insert_inbox_batch(&[ev("a", "e1", Some("m2"))])
        .await
        .expect("batch");
    assert_eq!(out, [Dup]);
    assert_eq!(
        row(&*s, "a", "e1").await.event.message_id.as_deref(),
        Some("m1")
    );
    let out = s
        .insert_inbox_batch(&[ev("a", "e3", Some("m2"))])
        .await
        .expect("batch");
    assert_eq!(out, [New]);
}
both_backends!(
    duplicates_keep_the_stored_row_and_reserve_nothing,
    duplicates_reserve_nothing
);

async fn claims_span_profiles(db: TestDb) {
    let s = open(&db).await;
    s.insert_inbox_batch(&[
        ev("b", "e1", None),
        ev("a", "e2", None),
        ev("b", "e3", None),
    ])
    .await
    .expect("insert");
    let got = claim(&*s, "me", 2_000, 1_000, 10).await;
    let keys: Vec<_> = got
        .iter()
        .map(|e| (e.event.profile.as_str(), e.event.event_id.as_str()))
        .collect();
    assert_eq!(keys, [("b", "e1"), ("a", "e2"), ("b", "e3")]);
    assert_eq!(
        got[1],
        row(&*s, "a", "e2").await,
        "a claim returns the row as stored"
    );

    // Leased until 3 000: not due at any instant up to its end, due the instant after.
    assert!(claim(&*s, "other", 3_000, 1_000, 10).await.is_empty());
    let after = claim(&*s, "other", 3_001, 1_000, 10).await;
    assert_eq!(attempts(&after), [("e1", 2), ("e2", 2), ("e3", 2)]);
}
both_backends!(
    claims_take_every_profile_in_arrival_order_and_leases_last_through_their_end,
    claims_span_profiles
);

async fn renewal_stays_with_its_owner(db: TestDb) {
    let s = open(&db).await;
    insert(&*s, &["e1", "e2"]).await;
    let mine = claim(&*s, "me", 2_000, 1_000, 10).await;
    finish(&*s, mine[1].id, Finish::Done).await;
    let theirs = claim(&*s, "them", 3_500, 1_000, 10).await;
    assert_eq!(
        attempts(&theirs),
        [("e1", 2)],
        "my lease ran out: the event moved on"
    );

    // My heartbeat comes late: the event is theirs now, and e2 is finished.
    let ids = [mine[0].id, mine[1].id];
    s.renew_leases("me", &ids, UnixMs(10_000))
        .await
        .expect("renew");
    s.renew_leases("me", &[], UnixMs(10_000))
        .await
        .expect("renewing nothing");
    let later = claim(&*s, "third", 4_501, 1_000, 10).await;
    assert_eq!(
        attempts(&later),
        [("e1", 3)],
        "a renewal never takes a lease back"
    );
    assert_eq!(
        row(&*s, "a", "e2").await.event.status,
        InboxStatus::Done,
        "nor revives a finished event"
    );
}
both_backends!(
    renewal_never_reaches_a_lease_taken_over_or_a_finished_event,
    renewal_stays_with_its_owner
);

async fn reclaim_keeps_attempts(db: TestDb) {
    let s = open(&db).await;
    let none = s.reclaim_inbox("me", UnixMs(1_000)).await.expect("reclaim");
    assert_eq!(none, 0, "nothing was claimed");
    insert(&*s, &["e1", "e2", "e3"]).await;
    let got = claim(&*s, "me", 2_000, 60_000, 2).await;
    finish(&*s, got[1].id, Finish::Done).await;

    let back = s.reclaim_inbox("me", UnixMs(3_000)).await.expect("reclaim");
    assert_eq!(back, 1, "only the claim still in hand");
    let e1 = row(&*s, "a", "e1").await;
    assert_eq!(
        (e1.event.status, e1.attempts, e1.next_attempt_at),
        (InboxStatus::Pending, 1, UnixMs(3_000)),
        "due at once, its attempt still counted"
    );
    assert_eq!(row(&*s, "a", "e2").await.event.status, InboxStatus::Done);
    let again = claim(&*s, "me", 3_000, 1_000, 10).await;
    assert_eq!(attempts(&again), [("e1", 2), ("e3", 1)]);
}
both_backends!(
    reclaimed_events_are_due_at_once_and_keep_their_attempts,
    reclaim_keeps_attempts
);

async fn finishing_records_each_outcome(db: TestDb) {
    let s = open(&db).await;
    insert(&*s, &["e1", "e2"]).await;
    let got = claim(&*s, "me", 2_000, 1_000, 10).await;
    finish(&*s, got[0].id, retry("boom", 3_000)).await;
    finish(&*s, got[1].id, failed("gave up")).await;
    let (e1, e2) = (row(&*s, "a", "e1").await, row(&*s, "a", "e2").await);
    assert_eq!(
        (
            e1.event.status,
            e1.attempts,
            e1.last_error.as_deref(),
            e1.next_attempt_at
        ),
        (InboxStatus::Pending, 1, Some("boom"), UnixMs(3_000))
    );
    assert_eq!(
        (e2.event.status, e2.attempts, e2.last_error.as_deref()),
        (InboxStatus::Failed, 1, Some("gave up"))
    );
    assert!(
        claim(&*s, "me", 2_999, 1_000, 10).await.is_empty(),
        "a retry is not due before its time, a failure never"
    );

    let again = claim(&*s, "me", 3_000, 1_000, 10).await;
    assert_eq!(attempts(&again), [("e1", 2)]);
    finish(&*s, again[0].id, Finish::Done).await;
    let e1 = row(&*s, "a", "e1").await;
    assert_eq!(
        (e1.event.status, e1.attempts, e1.last_error),
        (InboxStatus::Done, 2, None),
        "done clears the last error"
    );
    let counts = s.inbox_counts().await.expect("counts");
    let expected = InboxCounts {
        failed: 1,
        ..InboxCounts::default()
    };
    assert_eq!(counts, expected);
}
both_backends!(
    finishing_records_the_outcome_and_done_clears_the_error,
    finishing_records_each_outcome
);

async fn release_only_what_is_claimed(db: TestDb) {
    let s = open(&db).await;
    insert(&*s, &["e1", "e2", "e3"]).await;
    let got = claim(&*s, "me", 2_000, 1_000, 10).await;
    finish(&*s, got[0].id, Finish::Done).await;
    finish(&*s, got[1].id, failed("gave up")).await;
    let ids: Vec<i64> = got.iter().map(|e| e.id).collect();
    s.release_inbox(&ids).await.expect("release");
    s.release_inbox(&ids).await.expect("released twice");
    s.release_inbox(&[]).await.expect("releasing nothing");
    let mut states = Vec::new();
    for id in ["e1", "e2", "e3"] {
        let e = row(&*s, "a", id).await;
        states.push((e.event.status, e.attempts));
    }
    assert_eq!(
        states,
        [
            (InboxStatus::Done, 1),
            (InboxStatus::Failed, 1),
            (InboxStatus::Pending, 0)
        ],
        "finished events stay finished; a second release counts nothing back"
    );
}
both_backends!(
    release_returns_only_events_still_claimed,
    release_only_what_is_claimed
);

async fn problems_newest_first(db: TestDb) {
    let s = open(&db).await;
    let mut batch: Vec<_> = (1..=5).map(|i| ev("a", &format!("e{i}"), None)).collect();
    batch.push(ev("b", "e6", None));
    s.insert_inbox_batch(&batch).await.expect("insert");
    let got = claim(&*s, "me", 2_000, 1_000, 10).await;
    let deferred = Finish::Deferred {
        error: "database error".into(),
        at: UnixMs(9_000),
    };
    let outcomes = [retry("boom", 9_000), Finish::Done, failed("bad"), deferred];
    for (e, outcome) in got.iter().zip(outcomes) {
        finish(&*s, e.id, outcome).await;
    }
    s.release_inbox(&[got[4].id]).await.expect("release");
    finish(&*s, got[5].id, failed("worse")).await;

    let problems = s.inbox_problems(10).await.expect("problems");
    let seen: Vec<_> = problems
        .iter()
        .map(|p| {
            let error = p.last_error.as_deref();
            (
                p.profile.as_str(),
                p.event_id.as_str(),
                p.status,
                p.attempts,
                error,
            )
        })
        .collect();
    assert_eq!(
        seen,
        [
            ("b", "e6", InboxStatus::Failed, 1, Some("worse")),
            ("a", "e3", InboxStatus::Failed, 1, Some("bad")),
            ("a", "e1", InboxStatus::Pending, 1, Some("boom")),
        ],
        "newest first; a deferred or released event is no problem"
    );
    assert_eq!(problems[0].event_type, "im.message.receive_v1");
    let two = s.inbox_problems(2).await.expect("problems");
    assert_eq!(two, &problems[..2]);
    let counts = s.inbox_counts().await.expect("counts");
    let expected = InboxCounts {
        pending: 3,
        processing: 0,
        failed: 2,
        retrying: 1,
    };
    assert_eq!(counts, expected);
}
both_backends!(
    problems_are_the_newest_failures_and_retries_up_to_the_limit,
    problems_newest_first
);

/// A pending event of profile `a` in `chat`, received at 1 000.
fn in_chat(event_id: &str, chat: &str) -> NewInboxEvent {
    NewInboxEvent {
        chat_key: chat.into(),
        ..ev("a", event_id, None)
    }
}

/// Claims one chat's events (at most `per_chat`), starting after `after`.
async fn claim_chat(s: &dyn Store, per_chat: i64, after: Option<&str>) -> Vec<String> {
    let limits = ClaimLimits { chats: 1, per_chat };
    s.claim_inbox("me", UnixMs(2_000), 60_000, limits, after)
        .await
        .expect("claim")
        .into_iter()
        .map(|e| e.event.event_id)
        .collect()
}

async fn lanes_keep_chat_order(db: TestDb) {
    let s = open(&db).await;
    let batch = [
        in_chat("a1", "oc_a"),
        in_chat("b1", "oc_b"),
        in_chat("a2", "oc_a"),
        in_chat("a3", "oc_a"),
        in_chat("b2", "oc_b"),
    ];
    s.insert_inbox_batch(&batch).await.expect("insert");
    // A chat's oldest events, in arrival order, at most `per_chat`.
    assert_eq!(claim_chat(&*s, 2, None).await, ["a1", "a2"]);
    // A chat with events in hand is not claimed again, even from its start.
    assert_eq!(claim_chat(&*s, 2, None).await, ["b1", "b2"]);
    assert!(claim_chat(&*s, 2, None).await.is_empty());
    let a2 = row(&*s, "a", "a2").await.id;
    let a1 = row(&*s, "a", "a1").await.id;
    s.finish_inbox(&[a1, a2], &Finish::Done, UnixMs(2_100))
        .await
        .expect("finish");
    assert_eq!(claim_chat(&*s, 2, None).await, ["a3"]);
}
both_backends!(
    a_chat_is_claimed_oldest_first_and_never_twice_at_once,
    lanes_keep_chat_order
);

async fn claims_go_round(db: TestDb) {
    let s = open(&db).await;
    // Chat a has the oldest backlog; b and c each one newer event.
    let mut batch: Vec<_> = (0..5).map(|i| in_chat(&format!("a{i}"), "oc_a")).collect();
    batch.push(in_chat("b0", "oc_b"));
    batch.push(in_chat("c0", "oc_c"));
    s.insert_inbox_batch(&batch).await.expect("insert");
    let mut taken = Vec::new();
    let mut after: Option<String> = None;
    for _ in 0..5 {
        let got = claim_chat(&*s, 1, after.as_deref()).await;
        let id = row(&*s, "a", &got[0]).await.id;
        s.finish_inbox(&[id], &Finish::Done, UnixMs(2_100))
            .await
            .expect("finish");
        after = Some(row(&*s, "a", &got[0]).await.event.chat_key);
        taken.extend(got);
    }
    // Round the chats, not oldest first: b and c do not wait for a's backlog.
    assert_eq!(taken, ["a0", "b0", "c0", "a1", "a2"]);
}
both_backends!(
    claims_go_round_the_chats_so_a_backlog_does_not_starve_a_quiet_chat,
    claims_go_round
);

/// The rows the scan of lanes emitted, from Postgres's `EXPLAIN ANALYZE` of a claim's
/// look-up of free chats (`$1` now, `$2` chats to look at, `$3` chats wanted).
async fn chats_looked_at(db: &TestDb, wanted: i64) -> i64 {
    let q = free_chats_query(false)
        .replace("$1", "2000")
        .replace("$2", "1024")
        .replace("$3", &wanted.to_string());
    let plan = db.plan(&format!("(ANALYZE, COSTS OFF) {q}")).await;
    let line = plan
        .lines()
        .find(|l| l.contains("CTE Scan on lanes"))
        .unwrap_or_else(|| panic!("no scan of the lanes in the plan:\n{plan}"));
    let rows = line
        .split("rows=")
        .nth(1)
        .and_then(|r| r.split(' ').next())
        .and_then(|n| n.parse().ok());
    rows.unwrap_or_else(|| panic!("no row count in {line:?}"))
}

async fn claims_look_at_what_they_take(db: TestDb) {
    let s = open(&db).await;
    // Forty chats of two events each.
    let batch: Vec<_> = (0..80)
        .map(|i| in_chat(&format!("e{i:02}"), &format!("oc_{:02}", i % 40)))
        .collect();
    s.insert_inbox_batch(&batch).await.expect("insert");
    let limits = ClaimLimits {
        chats: 2,
        per_chat: 1,
    };
    let mut taken = Vec::new();
    for _ in 0..2 {
        let got = s
            .claim_inbox("me", UnixMs(2_000), 60_000, limits, None)
            .await
            .expect("claim");
        taken.extend(got.into_iter().map(|e| e.event.event_id));
    }
    // The lowest free chats, whatever the plan: the two in hand are passed over.
    assert_eq!(taken, ["e00", "e01", "e02", "e03"]);
    if db.kind == Kind::Postgres {
        db.exec(&["ANALYZE inbox_events"]).await;
        // Four chats in hand (each with an event still pending), two wanted: the look-up
        // stops at the sixth chat of forty.
        assert_eq!(chats_looked_at(&db, 2).await, 6);
    }
}
both_backends!(
    a_claim_looks_at_only_the_chats_it_takes_in_key_order,
    claims_look_at_what_they_take
);
