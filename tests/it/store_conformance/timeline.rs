//! The web view's reads: recent threads per profile, a thread's records, verdicts, turns
//! and decisions (a thread whose root was never recorded included), and a session's feed
//! segments and digests, on both backends.

use feishu_bridge::{
    store::{
        DigestReason, DigestStatus, DigestTrigger, NewDigest, NewDigestRun, NewFeedItem,
        PackLimits, RouteWrite, Store, ThreadOf, TurnState,
    },
    util::UnixMs,
    vocab::kinds::EventType,
};

use super::{CHAT, KEY, ROOT, completion, open, queue, record, route, said_at, start, turn, write};
use crate::{both_backends, support::TestDb};

fn in_root(
    root: &str,
    e: feishu_bridge::store::NewContextEvent,
) -> feishu_bridge::store::NewContextEvent {
    feishu_bridge::store::NewContextEvent {
        root_msg_id: root.into(),
        ..e
    }
}

/// `profile` observes `message_id` of thread `root`, said at `at`.
async fn observe(
    s: &dyn Store,
    profile: &str,
    root: &str,
    message_id: &str,
    kind: EventType,
    at: i64,
) {
    let e = in_root(root, said_at(at, record(profile, message_id, kind)));
    s.apply_route(&route(profile, message_id, vec![e]))
        .await
        .expect("route");
}

/// The thread [`ROOT`]: its root and a message seen by `a` and `b`, a request of `a`
/// that ran (turn `t1`, decision made), and a thread `om_late` of `a` said later.
async fn seed(s: &dyn Store) -> i64 {
    observe(s, "a", ROOT, ROOT, EventType::TopicRoot, 1_000).await;
    observe(s, "a", ROOT, "om_1", EventType::HumanMessage, 2_000).await;
    observe(s, "b", ROOT, "om_1", EventType::HumanMessage, 2_000).await;
    write(
        s,
        &[said_at(3_000, record("a", "om_t1", EventType::UserRequest))],
    )
    .await;
    queue(s, turn("a", KEY, "t1")).await;
    let started = start(s, "t1", "sid-1").await.expect("started");
    let mut answered = completion("a", "t1", None);
    answered.output_event.created_at = UnixMs(4_000);
    s.complete_turn(&answered).await.expect("complete");
    observe(s, "a", "om_late", "om_late", EventType::TopicRoot, 9_000).await;
    started.decision_id
}

/// (profile, root, last said, messages, turns, latest turn state).
type Summary<'a> = (&'a str, &'a str, i64, i64, i64, Option<&'a str>);

async fn threads_and_their_records(db: TestDb) {
    let s = open(&db).await;
    let decision_id = seed(&*s).await;

    let recent = s.recent_threads(UnixMs(0), 10).await.expect("recent");
    let rows: Vec<Summary> = recent
        .iter()
        .map(|t| {
            (
                t.profile.as_str(),
                t.root_msg_id.as_str(),
                t.last_at.millis(),
                t.messages,
                t.turns,
                t.latest_turn_state.as_deref(),
            )
        })
        .collect();
    // Newest first; the completion recorded the answer `om_reply_t1`.
    assert_eq!(
        rows,
        [
            ("a", "om_late", 9_000, 1, 0, None),
            ("a", ROOT, 4_000, 4, 1, Some("succeeded")),
            ("b", ROOT, 2_000, 1, 0, None),
        ]
    );
    assert!(recent.iter().all(|t| t.chat_id == CHAT));
    assert_eq!(
        s.recent_threads(UnixMs(0), 1).await.expect("recent").len(),
        1
    );
    let since = s.recent_threads(UnixMs(2_500), 10).await.expect("recent");
    assert_eq!(since.len(), 2, "only threads said in since then");

    let all = ThreadOf {
        root_msg_id: ROOT,
        profile: None,
    };
    let events = s.timeline_events(all).await.expect("events");
    let said: Vec<(&str, &str, &str)> = events
        .iter()
        .map(|e| {
            (
                e.bot_profile.as_str(),
                e.message_id.as_str(),
                e.event_type.as_str(),
            )
        })
        .collect();
    assert_eq!(
        said,
        [
            ("a", ROOT, "topic_root"),
            ("a", "om_1", "human_message"),
            ("b", "om_1", "human_message"),
            ("a", "om_t1", "user_request"),
            ("a", "om_reply_t1", "agent_output"),
        ],
        "said order, every profile"
    );
    let root = &events[0];
    assert_eq!(root.text, format!("text of {ROOT}"));
    assert_eq!(root.author_label.as_deref(), Some("Alice"));
    assert!(root.item_id.is_some() && !root.recalled);
    assert!(events[3].item_id.is_none(), "a request has no item");

    let only_b = ThreadOf {
        profile: Some("b"),
        ..all
    };
    let b_events = s.timeline_events(only_b).await.expect("events");
    assert_eq!(b_events.len(), 1);

    let verdicts = s.timeline_verdicts(all).await.expect("verdicts");
    let v: Vec<(&str, &str, String)> = verdicts
        .iter()
        .map(|v| {
            (
                v.message_id.as_str(),
                v.profile.as_str(),
                v.verdict.to_string(),
            )
        })
        .collect();
    assert_eq!(
        v,
        [
            ("om_1", "a", "observed".to_string()),
            ("om_1", "b", "observed".to_string()),
            (ROOT, "a", "observed".to_string()),
            ("om_t1", "a", "invoked".to_string()),
        ]
    );
    assert_eq!(verdicts[3].decision_id, Some(decision_id));
    assert_eq!(s.timeline_verdicts(only_b).await.expect("v").len(), 1);
    assert_eq!(verdicts[0].chat_id, CHAT);

    let turns = s.timeline_turns(all).await.expect("turns");
    assert_eq!(turns.len(), 1);
    assert_eq!(turns[0].turn_id, "t1");
    assert_eq!(turns[0].state, TurnState::Succeeded);
    assert!(s.timeline_turns(only_b).await.expect("turns").is_empty());

    let decisions = s.timeline_decisions(all).await.expect("decisions");
    assert_eq!(decisions.len(), 1);
    assert_eq!(
        (
            decisions[0].id,
            decisions[0].profile.as_str(),
            decisions[0].message_id.as_str()
        ),
        (decision_id, "a", "om_t1")
    );
    assert!(s.timeline_decisions(only_b).await.expect("d").is_empty());

    // A recall shows: the record stays, without its text.
    s.recall("om_1", CHAT, UnixMs(10_000))
        .await
        .expect("recall");
    let events = s.timeline_events(all).await.expect("events");
    let recalled: Vec<_> = events.iter().filter(|e| e.message_id == "om_1").collect();
    assert!(recalled.iter().all(|e| e.recalled && e.text.is_empty()));

    // A thread whose root was never recorded is found by its records.
    observe(
        &*s,
        "a",
        "om_unseen_root",
        "om_reply",
        EventType::HumanMessage,
        5_000,
    )
    .await;
    let loose = ThreadOf {
        root_msg_id: "om_unseen_root",
        profile: None,
    };
    let events = s.timeline_events(loose).await.expect("events");
    assert_eq!(events.len(), 1);
    assert_eq!(events[0].message_id, "om_reply");
    let nothing = ThreadOf {
        root_msg_id: "om_nothing",
        profile: None,
    };
    assert!(s.timeline_events(nothing).await.expect("events").is_empty());
    assert!(s.timeline_turns(nothing).await.expect("turns").is_empty());
}

both_backends!(
    recent_threads_and_a_thread_s_records,
    threads_and_their_records
);

/// Gathers `message_id` into `profile`'s session `key` at `at`.
async fn gather(s: &dyn Store, profile: &str, key: &str, message_id: &str, at: i64) {
    let write = RouteWrite {
        feed: Some(NewFeedItem {
            profile: profile.into(),
            session_key: key.into(),
            chat_id: CHAT.into(),
            message_id: message_id.into(),
            sender: "Alice".into(),
            text: format!("said {message_id}"),
            said_at: UnixMs(at),
            gathered_at: UnixMs(at),
        }),
        ..route(profile, message_id, Vec::new())
    };
    s.apply_route(&write).await.expect("gather");
}

async fn pack(s: &dyn Store, profile: &str, key: &str, at: i64) -> i64 {
    let limits = PackLimits {
        max_items: 10,
        max_chars: 1_000,
    };
    s.pack_segment(profile, key, limits, UnixMs(at))
        .await
        .expect("pack")
        .expect("a segment")
        .id
}

fn digest(profile: &str, key: &str, date: &str) -> NewDigest {
    NewDigest {
        date: date.into(),
        profile: profile.into(),
        session_key: key.into(),
        session_id: "sid-1".into(),
        chat_id: CHAT.into(),
        chars: 10,
        messages: 2,
        last_event_id: 1,
        summary: Some(format!("summary of {profile} on {date}")),
        status: DigestStatus::Written,
        reason: DigestReason::Summarized,
        detail: None,
        now: UnixMs(2_000),
    }
}

async fn session_feed_and_digests(db: TestDb) {
    let s = open(&db).await;
    gather(&*s, "a", KEY, "om_f1", 100).await;
    let first = pack(&*s, "a", KEY, 200).await;
    gather(&*s, "a", KEY, "om_f2", 300).await;
    let second = pack(&*s, "a", KEY, 400).await;
    gather(&*s, "a", "group:other", "om_f3", 500).await;
    pack(&*s, "a", "group:other", 600).await;
    gather(&*s, "b", KEY, "om_f4", 500).await;
    pack(&*s, "b", KEY, 600).await;

    let ids = |rows: Vec<feishu_bridge::store::FeedSegmentRow>| -> Vec<i64> {
        rows.into_iter().map(|r| r.id).collect()
    };
    let both = s.session_segments("a", KEY, 10).await.expect("segments");
    assert_eq!(
        ids(both),
        [first, second],
        "oldest first, this session only"
    );
    let newest = s.session_segments("a", KEY, 1).await.expect("segments");
    assert_eq!(ids(newest), [second], "the newest `limit`");
    assert!(
        s.session_segments("a", "group:none", 10)
            .await
            .expect("s")
            .is_empty()
    );

    for (date, at) in [("2026-12-01", 1_000), ("2026-12-02", 2_000)] {
        let run = NewDigestRun {
            date: date.into(),
            trigger: DigestTrigger::Manual,
            timezone: "UTC".into(),
            started_at: UnixMs(at),
        };
        assert!(s.claim_digest_run(&run).await.expect("claim"));
        s.record_digests(&[digest("a", KEY, date), digest("b", KEY, date)])
            .await
            .expect("record");
    }
    let dates = |rows: Vec<feishu_bridge::store::DigestRow>| -> Vec<(String, String)> {
        rows.into_iter().map(|d| (d.profile, d.date)).collect()
    };
    let a = s.session_digests("a", KEY, 10).await.expect("digests");
    assert_eq!(
        dates(a),
        [
            ("a".to_string(), "2026-12-01".to_string()),
            ("a".to_string(), "2026-12-02".to_string())
        ]
    );
    let latest = s.session_digests("a", KEY, 1).await.expect("digests");
    assert_eq!(
        latest[0].summary.as_deref(),
        Some("summary of a on 2026-12-02")
    );
    assert_eq!(latest.len(), 1);
    assert!(
        s.session_digests("a", "group:other", 10)
            .await
            .expect("d")
            .is_empty()
    );
}

both_backends!(a_session_s_feed_and_digests, session_feed_and_digests);
