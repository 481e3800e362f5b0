//! Context decisions: recorded, linked from their request's verdict, and found again.

use feishu_bridge::{
    store::{DecisionRow, NewDecision, Store},
    util::UnixMs,
};

use super::{ROOT, decision, open, verdict};
use crate::{both_backends, support::TestDb};

/// The id of the decision `latest_decision` finds, if any.
async fn latest(s: &dyn Store, profile: &str, root: &str, message_id: Option<&str>) -> Option<i64> {
    let row = s
        .latest_decision(profile, root, message_id)
        .await
        .expect("latest decision");
    row.map(|d| d.id)
}

async fn recorded(db: TestDb) {
    let s = open(&db).await;
    for profile in ["a", "b"] {
        s.record_verdict(&verdict(profile, "om_1"))
            .await
            .expect("verdict");
    }
    // The request quotes the thread's root, twice over: each source is kept once.
    let d = NewDecision {
        source_message_ids: vec!["om_1".into(), ROOT.into(), ROOT.into()],
        ..decision("a", "om_1", "sid-1")
    };
    let id = s.record_decision(&d).await.expect("record");
    let row = s.decision(id).await.expect("read").expect("the decision");
    let expected = DecisionRow {
        id,
        decision: NewDecision {
            source_message_ids: Vec::new(),
            ..d
        },
    };
    assert_eq!(
        row, expected,
        "read back as recorded (sources are not read)"
    );
    assert!(s.decision(id + 1_000).await.expect("read").is_none());

    let links = |rows: Vec<feishu_bridge::store::VerdictRow>| {
        rows.into_iter()
            .map(|v| (v.profile, v.decision_id))
            .collect::<Vec<_>>()
    };
    let linked = links(s.verdicts("om_1", None).await.expect("verdicts"));
    assert_eq!(linked, [("a".into(), Some(id)), ("b".into(), None)]);

    // A later decision on the same request is the one linked; a decision without a
    // verdict is recorded all the same.
    let newer = s
        .record_decision(&decision("a", "om_1", "sid-2"))
        .await
        .expect("record");
    let unrouted = s
        .record_decision(&decision("a", "om_9", "sid-1"))
        .await
        .expect("record");
    assert!(id < newer && newer < unrouted, "ids grow");
    let linked = links(s.verdicts("om_1", Some("a")).await.expect("verdicts"));
    assert_eq!(linked, [("a".into(), Some(newer))]);
    assert!(s.decision(unrouted).await.expect("read").is_some());
}
both_backends!(
    a_decision_reads_back_as_recorded_and_is_linked_from_its_verdict,
    recorded
);

async fn latest_of_a_thread(db: TestDb) {
    let s = open(&db).await;
    let made = [
        decision("a", "om_1", "sid-1"),
        decision("a", "om_2", "sid-1"),
        decision("a", "om_1", "sid-1"),
        decision("b", "om_2", "sid-1"),
        NewDecision {
            root_msg_id: "om_root2".into(),
            ..decision("a", "om_5", "sid-1")
        },
    ];
    let mut ids = Vec::new();
    for d in &made {
        ids.push(s.record_decision(d).await.expect("record"));
    }
    let found = [
        latest(&*s, "a", ROOT, None).await,
        latest(&*s, "a", ROOT, Some("om_2")).await,
        latest(&*s, "a", ROOT, Some("om_1")).await,
        latest(&*s, "b", ROOT, None).await,
        latest(&*s, "a", "om_root2", None).await,
    ];
    assert_eq!(
        found,
        [
            Some(ids[2]),
            Some(ids[1]),
            Some(ids[2]),
            Some(ids[3]),
            Some(ids[4])
        ],
        "the newest of the profile in the thread, of the message when named"
    );
    let missing = [
        latest(&*s, "a", "om_root2", Some("om_1")).await,
        latest(&*s, "c", ROOT, None).await,
        latest(&*s, "a", "om_root9", None).await,
    ];
    assert_eq!(missing, [None, None, None]);
}
both_backends!(
    latest_decision_is_the_newest_of_a_profile_in_a_thread,
    latest_of_a_thread
);

async fn retention(db: TestDb) {
    let s = open(&db).await;
    let at = |created_at, message_id: &str| NewDecision {
        created_at: UnixMs(created_at),
        source_message_ids: vec![message_id.into(), ROOT.into()],
        ..decision("a", message_id, "sid-1")
    };
    let old = s.record_decision(&at(100, "om_old")).await.expect("record");
    let edge = s
        .record_decision(&at(5_000, "om_edge"))
        .await
        .expect("record");
    let new = s
        .record_decision(&at(6_000, "om_new"))
        .await
        .expect("record");

    s.purge(UnixMs(5_000)).await.expect("purge");
    assert!(
        s.decision(old).await.expect("read").is_none(),
        "older: gone"
    );
    assert_eq!(db.count("decision_sources").await, 4, "its sources with it");
    for id in [edge, new] {
        let row = s.decision(id).await.expect("read").expect("kept");
        assert_eq!(row.decision.prompt_preview, "the prompt", "kept whole");
    }
    assert_eq!(latest(&*s, "a", ROOT, None).await, Some(new));
    assert_eq!(latest(&*s, "a", ROOT, Some("om_old")).await, None);
}
both_backends!(retention_purges_decisions_older_than_the_cutoff, retention);
