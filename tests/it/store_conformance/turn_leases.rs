//! Turns across replicas: heartbeats, which turns a replica may pick up, takeovers that
//! only one replica wins, the order of a session's turns, and stops asked through the
//! database.

use feishu_bridge::{
    store::{OwnedTurn, Store, TurnState},
    util::UnixMs,
};

use super::{KEY, OWNER, open, queue, start, turn};
use crate::{both_backends, support::TestDb};

/// The ids of the turns `me` may pick up when replicas silent since `alive_since` are dead.
async fn claimable(s: &dyn Store, me: &str, alive_since: i64) -> Vec<String> {
    let rows = s
        .claimable_turns(me, UnixMs(alive_since))
        .await
        .expect("claimable");
    rows.into_iter().map(|t| t.turn_id).collect()
}

fn owned(turn_id: &str, owner: &str) -> Option<OwnedTurn> {
    Some(OwnedTurn {
        turn_id: turn_id.into(),
        lease_owner: Some(owner.into()),
    })
}

async fn heartbeats_and_takeovers(db: TestDb) {
    let s = open(&db).await;
    // replica-a queued t1 and t2 and beat at 1000; replica-b beats at 5000.
    queue(&*s, turn("a", KEY, "t1")).await;
    queue(&*s, turn("a", "other-session", "t2")).await;
    s.heartbeat(OWNER, UnixMs(10), UnixMs(1000))
        .await
        .expect("beat");
    s.heartbeat("replica-b", UnixMs(20), UnixMs(5000))
        .await
        .expect("beat");
    let alive = s.replicas(UnixMs(900)).await.expect("replicas");
    let ids: Vec<_> = alive.iter().map(|r| r.replica_id.as_str()).collect();
    assert_eq!(ids, [OWNER, "replica-b"]);
    assert_eq!(
        (alive[0].started_at, alive[0].heartbeat_at),
        (UnixMs(10), UnixMs(1000))
    );
    assert_eq!(s.replicas(UnixMs(2000)).await.expect("replicas").len(), 1);

    // While replica-a is alive its turns are its own; once silent, anyone's.
    assert_eq!(claimable(&*s, OWNER, 900).await, ["t1", "t2"]);
    assert!(claimable(&*s, "replica-b", 900).await.is_empty());
    assert_eq!(claimable(&*s, "replica-b", 2000).await, ["t1", "t2"]);

    // A takeover names the owner it read: the first wins, a stale one changes nothing.
    assert!(
        s.take_turn("t1", Some(OWNER), "replica-b")
            .await
            .expect("take")
    );
    assert!(
        !s.take_turn("t1", Some(OWNER), "replica-c")
            .await
            .expect("take")
    );
    let t1 = s.turn("t1").await.expect("read").expect("t1");
    assert_eq!(t1.lease_owner.as_deref(), Some("replica-b"));
    assert_eq!(claimable(&*s, OWNER, 2000).await, ["t2"], "t1 is b's now");
    // Ended turns are nobody's to take.
    s.end_turn("t2", TurnState::Failed, "x", UnixMs(300))
        .await
        .expect("end");
    assert!(
        !s.take_turn("t2", Some(OWNER), "replica-b")
            .await
            .expect("take")
    );
    assert!(claimable(&*s, "replica-b", 2000).await == ["t1"]);

    // A beat of 0 gives a replica up at once.
    s.heartbeat("replica-b", UnixMs(20), UnixMs(0))
        .await
        .expect("beat");
    assert_eq!(claimable(&*s, "replica-c", 1).await, ["t1"]);
}
both_backends!(
    a_silent_replicas_turns_are_taken_over_by_exactly_one_other,
    heartbeats_and_takeovers
);

async fn session_order_and_starts(db: TestDb) {
    let s = open(&db).await;
    queue(&*s, turn("a", KEY, "t1")).await;
    queue(&*s, turn("a", KEY, "t2")).await;
    queue(&*s, turn("a", "other-session", "t3")).await;
    assert_eq!(
        s.earlier_unfinished("t2").await.expect("earlier"),
        owned("t1", OWNER)
    );
    assert_eq!(s.earlier_unfinished("t1").await.expect("earlier"), None);
    assert_eq!(s.earlier_unfinished("t3").await.expect("earlier"), None);

    // A turn taken over by another replica does not start here.
    assert!(
        s.take_turn("t3", Some(OWNER), "replica-b")
            .await
            .expect("take")
    );
    assert!(start(&*s, "t3", "sid-1").await.is_none());

    assert!(start(&*s, "t1", "sid-1").await.is_some());
    assert_eq!(
        s.earlier_unfinished("t2").await.expect("earlier"),
        owned("t1", OWNER),
        "a running turn holds its session"
    );
    // The database allows one running turn per session, whoever asks.
    let both = start_err(&*s, "t2").await;
    assert!(both, "a second running turn in one session is refused");
    s.end_turn("t1", TurnState::Succeeded, "", UnixMs(300))
        .await
        .expect("end");
    assert_eq!(s.earlier_unfinished("t2").await.expect("earlier"), None);
    assert!(start(&*s, "t2", "sid-1").await.is_some());
}
both_backends!(
    a_sessions_turns_start_one_at_a_time_and_only_on_their_owner,
    session_order_and_starts
);

/// Whether starting `turn_id` fails (the database refuses it).
async fn start_err(s: &dyn Store, turn_id: &str) -> bool {
    let t = s.turn(turn_id).await.expect("read").expect("the turn");
    let decision = feishu_bridge::store::NewDecision {
        session_key: t.session_key.clone(),
        ..super::decision(&t.profile, &t.message_id, "sid-1")
    };
    let start = feishu_bridge::store::TurnStart {
        turn_id,
        decision: &decision,
        consume: None,
        now: UnixMs(200),
        owner: OWNER,
    };
    s.start_turn(&start).await.is_err()
}

async fn stops_through_the_database(db: TestDb) {
    let s = open(&db).await;
    queue(&*s, turn("a", KEY, "t1")).await;
    queue(&*s, turn("a", KEY, "t2")).await;
    // Nothing runs yet: a stop asks nobody.
    let asked = s.request_stop("a", KEY, UnixMs(250)).await.expect("stop");
    assert_eq!(asked, None);
    assert_eq!(
        s.request_stop_turn("t1", UnixMs(250)).await.expect("stop"),
        None
    );
    assert!(s.stop_requests(OWNER).await.expect("asked").is_empty());

    start(&*s, "t1", "sid-1").await.expect("started");
    assert_eq!(
        s.request_stop("b", KEY, UnixMs(260)).await.expect("stop"),
        None
    );
    assert_eq!(
        s.request_stop("a", KEY, UnixMs(260)).await.expect("stop"),
        owned("t1", OWNER)
    );
    assert_eq!(s.stop_requests(OWNER).await.expect("asked"), ["t1"]);
    assert!(
        s.stop_requests("replica-b")
            .await
            .expect("asked")
            .is_empty()
    );
    assert_eq!(
        s.request_stop_turn("t1", UnixMs(270)).await.expect("stop"),
        owned("t1", OWNER)
    );
    assert_eq!(
        s.request_stop_turn("t2", UnixMs(270)).await.expect("stop"),
        None
    );
    // Once it ended, the stop is nobody's business.
    s.end_turn("t1", TurnState::Cancelled, "stopped", UnixMs(300))
        .await
        .expect("end");
    assert!(s.stop_requests(OWNER).await.expect("asked").is_empty());
}
both_backends!(
    a_stop_is_asked_of_the_running_turn_and_seen_by_its_owner,
    stops_through_the_database
);
