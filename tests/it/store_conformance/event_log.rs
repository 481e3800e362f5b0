//! The event log and routing's writes: records and items, verdicts, names, recalls,
//! retention, and the reads that feed the selector.

use feishu_bridge::{
    routing::{Reason, Verdict},
    store::{
        ClaimLimits, ContextEventRow, Finish, InboxStatus, NewContextEvent, NewDecision,
        NewInboxEvent, NewOutbound, NewTurn, NewVerdict, RouteWrite, Store, TurnState, VerdictRow,
    },
    util::UnixMs,
    vocab::{
        Candidate,
        EventType::{self, AgentOutput, HumanMessage, TopicRoot, UserRequest},
        ItemType,
    },
};

use super::{
    CHAT, KEY, ROOT, SCOPE, completion, decision, ev, map_session, open, pending, queue, record,
    reply, reset, route, said_at, session, start, start_with, turn, verdict, write,
};
use crate::{both_backends, support::TestDb};

/// Each row's message id and type.
pub(super) fn kinds(rows: &[ContextEventRow]) -> Vec<(&str, EventType)> {
    rows.iter()
        .map(|r| (r.message_id.as_str(), r.event_type))
        .collect()
}

/// Each candidate's message id.
pub(super) fn messages(candidates: &[Candidate]) -> Vec<&str> {
    candidates.iter().map(|c| c.message_id.as_str()).collect()
}

pub(super) async fn message_events(s: &dyn Store, message_id: &str) -> Vec<ContextEventRow> {
    s.message_events(message_id).await.expect("message events")
}

pub(super) async fn thread_events(
    s: &dyn Store,
    profile: &str,
    chat: &str,
    root: &str,
) -> Vec<ContextEventRow> {
    s.thread_events(feishu_bridge::store::ProfileThread::new(
        profile, chat, root,
    ))
    .await
    .expect("thread events")
}

async fn verdicts(s: &dyn Store, message_id: &str, profile: Option<&str>) -> Vec<VerdictRow> {
    s.verdicts(message_id, profile).await.expect("verdicts")
}

pub(super) async fn thread_candidates(s: &dyn Store, profile: &str, window: i64) -> Vec<Candidate> {
    s.thread_candidates(
        feishu_bridge::store::ProfileThread::new(profile, CHAT, ROOT),
        window,
    )
    .await
    .expect("thread candidates")
}

async fn pending_candidates(s: &dyn Store, cap: i64) -> Vec<Candidate> {
    s.pending_candidates("a", SCOPE, cap)
        .await
        .expect("pending candidates")
}

/// The topic root of thread [`ROOT`] as `profile` would inject it.
async fn root_of(s: &dyn Store, profile: &str) -> Option<(String, String)> {
    s.topic_root(feishu_bridge::store::ProfileThread::new(
        profile, CHAT, ROOT,
    ))
    .await
    .expect("topic root")
}

async fn text_of(s: &dyn Store, message_id: &str) -> Option<(String, String)> {
    s.message_text(message_id).await.expect("message text")
}

/// A record whose item was cut at record time.
fn truncated(e: NewContextEvent) -> NewContextEvent {
    let mut e = e;
    if let Some(item) = e.item.as_mut() {
        item.truncated = true;
    }
    e
}

async fn event_log_dedup_and_retention(db: TestDb) {
    let s = open(&db).await;
    let at = |message_id: &str, event_type, created_at| NewContextEvent {
        created_at: UnixMs(created_at),
        ..record("a", message_id, event_type)
    };
    s.apply_route(&route(
        "a",
        "om_old",
        vec![at("om_old", HumanMessage, 1_000)],
    ))
    .await
    .expect("write");
    // The same message recorded twice (at-least-once processing) stays one record; a
    // second type for the same message is its own record.
    s.apply_route(&route("a", "om_new", vec![at("om_new", TopicRoot, 9_000)]))
        .await
        .expect("write");
    let both = vec![
        at("om_new", TopicRoot, 9_000),
        at("om_new", UserRequest, 9_000),
    ];
    s.apply_route(&route("a", "om_new", both))
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
    s.apply_route(&route(
        "a",
        "om_newer",
        vec![at("om_newer", HumanMessage, 10_000)],
    ))
    .await
    .expect("write");
    s.purge(UnixMs(5_000)).await.expect("purge");
    let left = thread_events(&*s, "a", CHAT, ROOT).await;
    let ids: Vec<_> = left.iter().map(|e| e.message_id.as_str()).collect();
    assert_eq!(ids, ["om_new", "om_new", "om_newer"]);
    assert_eq!(db.count("thread_context_items").await, 2, "no orphan items");
}
both_backends!(
    event_log_deduplicates_per_message_and_type_and_purges_old_events,
    event_log_dedup_and_retention
);

async fn routing_again(db: TestDb) {
    let s = open(&db).await;
    let invoked = NewVerdict {
        verdict: Verdict::Invoked,
        reason: Reason::Mention,
        session_key: Some(KEY.into()),
        ..verdict("a", "om_t1")
    };
    let first = RouteWrite {
        verdict: invoked.clone(),
        session: Some(session("a", KEY, "sid-1", 100)),
        turn: Some(turn("a", KEY, "t1")),
        ..route("a", "om_t1", vec![record("a", "om_t1", UserRequest)])
    };
    let routed = s.apply_route(&first).await.expect("route");
    assert!(routed.fresh);
    let sid = routed.session.map(|r| r.session_id);
    assert_eq!(sid.as_deref(), Some("sid-1"));

    // Processed again after an outcome that was not recorded: another turn id, a later
    // time, another verdict.
    let again = RouteWrite {
        verdict: NewVerdict {
            verdict: Verdict::Ignored,
            reason: Reason::Recalled,
            created_at: UnixMs(20),
            ..invoked
        },
        session: Some(session("a", KEY, "sid-2", 200)),
        turn: Some(NewTurn {
            turn_id: "t2".into(),
            ..turn("a", KEY, "t1")
        }),
        ..first
    };
    let routed = s.apply_route(&again).await.expect("route");
    assert!(!routed.fresh);
    let touched = routed.session.map(|r| (r.session_id, r.updated_at));
    assert_eq!(touched, Some(("sid-1".into(), UnixMs(200))));
    assert!(
        s.turn("t2").await.expect("read").is_none(),
        "no second turn"
    );
    assert_eq!(s.turn_counts().await.expect("counts"), (1, 0));
    let stands = VerdictRow {
        profile: "a".into(),
        message_id: "om_t1".into(),
        chat_id: CHAT.into(),
        verdict: Verdict::Invoked,
        reason: Reason::Mention,
        session_key: Some(KEY.into()),
        decision_id: None,
        created_at: UnixMs(10),
        chain_id: None,
    };
    assert_eq!(verdicts(&*s, "om_t1", None).await, [stands]);
    assert_eq!(message_events(&*s, "om_t1").await.len(), 1);

    // Another profile routes the same message on its own; no session, none returned.
    let other = s
        .apply_route(&route("b", "om_t1", Vec::new()))
        .await
        .expect("route");
    assert!(other.fresh);
    assert!(other.session.is_none());
}
both_backends!(
    routing_a_message_again_queues_nothing_and_keeps_its_verdict,
    routing_again
);

async fn route_all_or_nothing(db: TestDb) {
    let s = open(&db).await;
    queue(&*s, turn("a", KEY, "t1")).await;
    // A second message whose turn reuses t1's id: the turn is refused, and with it
    // everything else the route would have written.
    let clash = RouteWrite {
        session: Some(session("a", "group:oc_2", "sid-9", 300)),
        names: vec![("ou_bob".into(), "Bob".into())],
        turn: Some(NewTurn {
            message_id: "om_2".into(),
            ..turn("a", KEY, "t1")
        }),
        ..route("a", "om_2", vec![record("a", "om_2", HumanMessage)])
    };
    assert!(s.apply_route(&clash).await.is_err());
    assert!(verdicts(&*s, "om_2", None).await.is_empty());
    assert!(message_events(&*s, "om_2").await.is_empty());
    assert!(s.name_of("a", "ou_bob").await.expect("name").is_none());
    let session = s.session("a", "group:oc_2").await.expect("session");
    assert!(session.is_none());
    let t1 = s.turn("t1").await.expect("read").expect("t1");
    assert_eq!(t1.message_id, "om_t1");

    // The same route with a turn of its own goes through as the message's first routing.
    let own = RouteWrite {
        turn: Some(NewTurn {
            message_id: "om_2".into(),
            ..turn("a", KEY, "t2")
        }),
        ..clash
    };
    assert!(s.apply_route(&own).await.expect("route").fresh);
    assert_eq!(message_events(&*s, "om_2").await.len(), 1);
    let name = s.name_of("a", "ou_bob").await.expect("name");
    assert_eq!(name.as_deref(), Some("Bob"));
}
both_backends!(a_route_is_written_whole_or_not_at_all, route_all_or_nothing);

async fn first_verdict_stands(db: TestDb) {
    let s = open(&db).await;
    let recalled = NewVerdict {
        chat_id: String::new(),
        verdict: Verdict::Ignored,
        reason: Reason::Recalled,
        ..verdict("b", "om_1")
    };
    let invoked = NewVerdict {
        verdict: Verdict::Invoked,
        reason: Reason::Mention,
        created_at: UnixMs(99),
        ..verdict("a", "om_1")
    };
    for v in [
        recalled,
        verdict("a", "om_1"),
        verdict("a", "om_2"),
        invoked,
    ] {
        s.record_verdict(&v).await.expect("verdict");
    }
    let rows = verdicts(&*s, "om_1", None).await;
    let seen: Vec<_> = rows
        .iter()
        .map(|v| (v.profile.as_str(), v.verdict, v.reason, v.chat_id.as_str()))
        .collect();
    assert_eq!(
        seen,
        [
            ("a", Verdict::Observed, Reason::NoMention, CHAT),
            ("b", Verdict::Ignored, Reason::Recalled, ""),
        ],
        "by profile, each profile's first verdict"
    );
    assert_eq!(verdicts(&*s, "om_1", Some("b")).await, &rows[1..]);
    assert!(verdicts(&*s, "om_1", Some("c")).await.is_empty());
    assert!(verdicts(&*s, "om_9", None).await.is_empty());
    assert!(
        message_events(&*s, "om_1").await.is_empty(),
        "a verdict alone records nothing else"
    );

    // Routed after its verdict was recorded: not fresh, so its turn is not queued.
    let late = RouteWrite {
        turn: Some(NewTurn {
            message_id: "om_1".into(),
            ..turn("b", KEY, "t1")
        }),
        ..route("b", "om_1", Vec::new())
    };
    assert!(!s.apply_route(&late).await.expect("route").fresh);
    assert!(s.turn("t1").await.expect("read").is_none());
}
both_backends!(
    the_first_verdict_of_a_profile_on_a_message_stands,
    first_verdict_stands
);

async fn names(db: TestDb) {
    let s = open(&db).await;
    let named = |message_id: &str, names: &[(&str, &str)]| RouteWrite {
        names: names
            .iter()
            .map(|(id, name)| (id.to_string(), name.to_string()))
            .collect(),
        ..route("a", message_id, Vec::new())
    };
    let first = named("om_1", &[("ou_bob", "Bob"), ("ou_carol", "Carol")]);
    s.apply_route(&first).await.expect("route");
    s.apply_route(&named("om_2", &[("ou_bob", "Robert")]))
        .await
        .expect("route");
    let mut seen = Vec::new();
    for (profile, open_id) in [
        ("a", "ou_bob"),
        ("a", "ou_carol"),
        ("b", "ou_bob"),
        ("a", "ou_dan"),
    ] {
        seen.push(s.name_of(profile, open_id).await.expect("name"));
    }
    let expected = [Some("Robert".to_string()), Some("Carol".into()), None, None];
    assert_eq!(seen, expected, "the latest name, per profile");
}
both_backends!(names_are_remembered_per_profile_and_the_latest_wins, names);

async fn thread_and_message_reads(db: TestDb) {
    let s = open(&db).await;
    let root = NewContextEvent {
        session_name: Some(KEY.into()),
        ..record("a", ROOT, TopicRoot)
    };
    let elsewhere = |chat: &str, root: &str, message_id: &str| NewContextEvent {
        chat_id: chat.into(),
        root_msg_id: root.into(),
        ..record("a", message_id, HumanMessage)
    };
    write(
        &*s,
        &[
            root,
            said_at(1_002, record("a", "om_2", HumanMessage)),
            said_at(1_002, record("b", "om_2", HumanMessage)),
            said_at(1_002, record("a", "om_2", UserRequest)),
            said_at(1_003, record("a", "om_3", AgentOutput)),
            elsewhere(CHAT, "om_root2", "om_x"),
            elsewhere("oc_2", ROOT, "om_y"),
        ],
    )
    .await;
    let rows = thread_events(&*s, "a", CHAT, ROOT).await;
    assert_eq!(
        kinds(&rows),
        [
            (ROOT, TopicRoot),
            ("om_2", HumanMessage),
            ("om_2", UserRequest),
            ("om_3", AgentOutput),
        ],
        "this profile's records of this thread, in said order (here also write order)"
    );
    assert!(rows.windows(2).all(|w| w[0].id < w[1].id));
    let with_items: Vec<_> = rows.iter().map(|r| r.item_id.is_some()).collect();
    assert_eq!(with_items, [true, true, false, true]);
    let expected = ContextEventRow {
        id: rows[0].id,
        chat_id: CHAT.into(),
        root_msg_id: ROOT.into(),
        message_id: ROOT.into(),
        event_type: TopicRoot,
        actor_type: "user".into(),
        actor_id: "ou_alice".into(),
        bot_profile: "a".into(),
        bridge_id: "cli_a".into(),
        session_name: Some(KEY.into()),
        history_scope: SCOPE.into(),
        text: format!("text of {ROOT}"),
        recalled: false,
        created_at: UnixMs(1_000),
        item_id: rows[0].item_id,
        author_label: Some("Alice".into()),
        item_text: Some(format!("item of {ROOT}")),
    };
    assert_eq!(rows[0], expected);
    assert_eq!(
        kinds(&thread_events(&*s, "b", CHAT, ROOT).await),
        [("om_2", HumanMessage)]
    );
    let other_root = thread_events(&*s, "a", CHAT, "om_root2").await;
    assert_eq!(kinds(&other_root), [("om_x", HumanMessage)]);
    let other_chat = thread_events(&*s, "a", "oc_2", ROOT).await;
    assert_eq!(kinds(&other_chat), [("om_y", HumanMessage)]);

    let of_message = message_events(&*s, "om_2").await;
    let seen: Vec<_> = of_message
        .iter()
        .map(|r| (r.bot_profile.as_str(), r.event_type))
        .collect();
    assert_eq!(
        seen,
        [("a", HumanMessage), ("b", HumanMessage), ("a", UserRequest)],
        "every profile's records; one message's, in write order"
    );
    assert!(message_events(&*s, "om_none").await.is_empty());
}
both_backends!(
    thread_events_are_one_profiles_thread_and_message_events_every_profiles_records,
    thread_and_message_reads
);

async fn record_events_dedup(db: TestDb) {
    let s = open(&db).await;
    write(&*s, &[]).await;
    write(&*s, &[record("a", "om_1", AgentOutput)]).await;
    let replayed = NewContextEvent {
        text: "another text".into(),
        ..record("a", "om_1", AgentOutput)
    };
    write(&*s, &[replayed, record("a", "om_2", HumanMessage)]).await;
    let rows = message_events(&*s, "om_1").await;
    let texts: Vec<_> = rows.iter().map(|r| r.text.as_str()).collect();
    assert_eq!(texts, ["text of om_1"], "the record already there stays");
    assert_eq!(db.count("thread_context_items").await, 2, "and its item");
    assert_eq!(message_events(&*s, "om_2").await.len(), 1);
    assert!(verdicts(&*s, "om_1", None).await.is_empty(), "no verdict");
}
both_backends!(
    record_events_skips_what_is_recorded_and_writes_no_verdict,
    record_events_dedup
);

async fn candidates_of_a_thread(db: TestDb) {
    let s = open(&db).await;
    write(
        &*s,
        &[
            record("a", ROOT, TopicRoot),
            said_at(1_001, truncated(record("a", "om_1", HumanMessage))),
            said_at(1_001, record("b", "om_1", HumanMessage)),
            said_at(1_002, record("b", "om_b", AgentOutput)),
            said_at(1_003, record("a", "om_2", UserRequest)),
            said_at(1_004, record("a", "om_3", AgentOutput)),
            said_at(1_005, record("a", "om_4", HumanMessage)),
        ],
    )
    .await;
    // Threads whose keys sort right next to this one's.
    let neighbours = [
        (CHAT, "om_roo"),
        (CHAT, "om_root0"),
        ("oc_0", ROOT),
        ("oc_10", ROOT),
    ];
    for (i, (chat, root)) in neighbours.into_iter().enumerate() {
        let e = NewContextEvent {
            chat_id: chat.into(),
            root_msg_id: root.into(),
            ..record("a", &format!("om_n{i}"), HumanMessage)
        };
        write(&*s, &[e]).await;
    }
    s.recall("om_4", CHAT, UnixMs(2_000)).await.expect("recall");

    let got = thread_candidates(&*s, "a", 10).await;
    assert_eq!(
        messages(&got),
        ["om_4", "om_3", "om_b", "om_1", ROOT],
        "newest first: its own topic root and discussion, every profile's answers"
    );
    let b_output = &message_events(&*s, "om_b").await[0];
    let expected = Candidate {
        item_id: b_output.item_id.expect("an item"),
        event_id: b_output.id,
        created_at: UnixMs(1_002),
        item_type: ItemType::AgentOutput,
        bot_profile: "b".into(),
        bridge_id: "cli_b".into(),
        message_id: "om_b".into(),
        author_label: "Alice".into(),
        text: "item of om_b".into(),
        truncated: false,
        recalled: false,
    };
    assert_eq!(got[2], expected);
    assert!(got[3].truncated);
    assert_eq!(
        (got[0].recalled, got[0].text.as_str()),
        (true, ""),
        "a recalled item comes flagged, without its text"
    );
    assert_eq!(
        messages(&thread_candidates(&*s, "a", 2).await),
        ["om_4", "om_3"]
    );
    assert_eq!(
        messages(&thread_candidates(&*s, "b", 10).await),
        ["om_3", "om_b", "om_1"]
    );
}
both_backends!(
    thread_candidates_are_the_newest_items_a_profile_may_consider,
    candidates_of_a_thread
);

async fn candidates_pending(db: TestDb) {
    let s = open(&db).await;
    map_session(&*s, session("a", KEY, "sid-1", 100)).await;
    let other_scope = NewContextEvent {
        history_scope: "chat:oc_2".into(),
        ..record("a", "om_6", HumanMessage)
    };
    write(
        &*s,
        &[
            record("a", "om_1", TopicRoot),
            record("a", "om_2", HumanMessage),
            record("a", "om_3", AgentOutput),
            record("a", "om_4", UserRequest),
            record("b", "om_5", HumanMessage),
            other_scope,
        ],
    )
    .await;
    let got = pending_candidates(&*s, 10).await;
    assert_eq!(messages(&got), ["om_2", "om_1"], "newest first");
    assert_eq!(messages(&pending_candidates(&*s, 1).await), ["om_2"]);

    // After the watermark moves, only what follows it is pending; recalled items come
    // flagged (the count leaves them out).
    s.reset_session(&reset("a", KEY, SCOPE, "sid-2", UnixMs(300)))
        .await
        .expect("reset")
        .expect("the session");
    assert!(pending_candidates(&*s, 10).await.is_empty());
    write(&*s, &[record("a", "om_7", HumanMessage)]).await;
    s.recall("om_7", CHAT, UnixMs(2_000)).await.expect("recall");
    let got = pending_candidates(&*s, 10).await;
    let seen: Vec<_> = got
        .iter()
        .map(|c| (c.message_id.as_str(), c.recalled, c.text.as_str()))
        .collect();
    assert_eq!(seen, [("om_7", true, "")]);
    assert_eq!(pending(&*s, "a", SCOPE).await, 0);
}
both_backends!(
    pending_candidates_are_the_newest_observed_items_after_the_watermark,
    candidates_pending
);

async fn topic_roots(db: TestDb) {
    let s = open(&db).await;
    assert_eq!(root_of(&*s, "a").await, None);
    let by_b = NewContextEvent {
        text: "root as b saw it".into(),
        ..record("b", ROOT, TopicRoot)
    };
    write(&*s, &[by_b]).await;
    let b_root = Some(("root as b saw it".to_string(), "Alice".to_string()));
    assert_eq!(
        root_of(&*s, "a").await,
        b_root,
        "another profile's record serves"
    );
    write(&*s, &[record("a", ROOT, TopicRoot)]).await;
    let a_root = Some((format!("text of {ROOT}"), "Alice".to_string()));
    assert_eq!(
        root_of(&*s, "a").await,
        a_root,
        "its own record first, its full text"
    );
    assert_eq!(root_of(&*s, "b").await, b_root);
    let wrong_chat = s
        .topic_root(feishu_bridge::store::ProfileThread::new("a", "oc_2", ROOT))
        .await
        .expect("topic root");
    assert_eq!(wrong_chat, None);

    // Without an item the sender's id labels it; a root recorded only as discussion is none.
    let bare = NewContextEvent {
        root_msg_id: "om_r2".into(),
        item: None,
        ..record("a", "om_r2", TopicRoot)
    };
    let discussed = NewContextEvent {
        root_msg_id: "om_r3".into(),
        ..record("a", "om_r3", HumanMessage)
    };
    write(&*s, &[bare, discussed]).await;
    let bare = s
        .topic_root(feishu_bridge::store::ProfileThread::new("a", CHAT, "om_r2"))
        .await
        .expect("topic root");
    let bare_root = Some(("text of om_r2".to_string(), "ou_alice".to_string()));
    assert_eq!(bare, bare_root);
    let discussed = s
        .topic_root(feishu_bridge::store::ProfileThread::new("a", CHAT, "om_r3"))
        .await
        .expect("topic root");
    assert_eq!(discussed, None);

    s.recall(ROOT, CHAT, UnixMs(2_000)).await.expect("recall");
    assert_eq!(
        (root_of(&*s, "a").await, root_of(&*s, "b").await),
        (None, None)
    );
}
both_backends!(
    topic_root_prefers_this_profiles_record_and_skips_recalled_roots,
    topic_roots
);

async fn message_texts(db: TestDb) {
    let s = open(&db).await;
    assert_eq!(text_of(&*s, "om_q").await, None);
    write(&*s, &[record("a", "om_q", UserRequest)]).await;
    let bare = Some(("text of om_q".to_string(), "ou_alice".to_string()));
    assert_eq!(text_of(&*s, "om_q").await, bare, "a record without an item");
    write(&*s, &[record("b", "om_q", HumanMessage)]).await;
    let item = Some(("item of om_q".to_string(), "Alice".to_string()));
    assert_eq!(text_of(&*s, "om_q").await, item, "the item's text first");
    s.recall("om_q", CHAT, UnixMs(2_000)).await.expect("recall");
    assert_eq!(text_of(&*s, "om_q").await, None);
}
both_backends!(
    message_text_prefers_an_item_and_skips_recalled_messages,
    message_texts
);

async fn recall_scrubs(db: TestDb) {
    let s = open(&db).await;
    s.insert_inbox_batch(&[
        ev("a", "e1", Some("om_1")),
        ev("b", "e2", Some("om_1")),
        ev("a", "e3", Some("om_2")),
    ])
    .await
    .expect("insert");
    write(
        &*s,
        &[
            record("a", "om_1", HumanMessage),
            record("a", "om_1", UserRequest),
            record("b", "om_1", HumanMessage),
            record("a", "om_2", HumanMessage),
        ],
    )
    .await;
    assert!(!s.is_recalled("om_1").await.expect("recalled?"));

    let n = s.recall("om_1", CHAT, UnixMs(5_000)).await.expect("recall");
    assert_eq!(n, 3, "every profile's records of the message");
    assert!(s.is_recalled("om_1").await.expect("recalled?"));
    assert!(!s.is_recalled("om_2").await.expect("recalled?"));
    let rows = message_events(&*s, "om_1").await;
    assert!(rows.iter().all(|r| r.recalled && r.text.is_empty()));
    let items: Vec<_> = rows.iter().map(|r| r.item_text.as_deref()).collect();
    assert_eq!(items, [Some(""), None, Some("")]);
    let metadata = "SELECT COUNT(*) FROM thread_context_events \
         WHERE message_id = 'om_1' AND metadata_json = '{}'";
    assert_eq!(db.scalar(metadata).await, 3, "its metadata goes too");
    let mut payloads = Vec::new();
    for (profile, event_id) in [("a", "e1"), ("b", "e2"), ("a", "e3")] {
        let e = s.inbox_event(profile, event_id).await.expect("read");
        payloads.push(e.expect("row").event.payload);
    }
    assert_eq!(
        payloads,
        ["{}", "{}", "{\"id\":\"e3\"}"],
        "the inbox keeps no copy"
    );
    let kept = &message_events(&*s, "om_2").await[0];
    assert_eq!((kept.recalled, kept.text.as_str()), (false, "text of om_2"));

    let again = s.recall("om_1", CHAT, UnixMs(6_000)).await.expect("recall");
    assert_eq!(
        again, 3,
        "recalling again changes nothing and counts the same"
    );
    let unseen = s
        .recall("om_late", CHAT, UnixMs(6_000))
        .await
        .expect("recall");
    assert_eq!(unseen, 0);
    assert!(
        s.is_recalled("om_late").await.expect("recalled?"),
        "a recall before its message arrives is remembered"
    );
}
both_backends!(
    recall_removes_a_messages_text_from_the_log_and_the_inbox,
    recall_scrubs
);

async fn recall_reaches_decisions_and_turns(db: TestDb) {
    let s = open(&db).await;
    // t3 in a session of its own: one running turn per session.
    for (t, key) in [("t1", KEY), ("t2", KEY), ("t3", "thread:oc_1:om_root")] {
        queue(&*s, turn("a", key, t)).await;
    }
    // t2's decision quotes t1's message; t3's holds only its own.
    let quoting = NewDecision {
        source_message_ids: vec!["om_t2".into(), "om_t1".into()],
        ..decision("a", "om_t2", "sid-1")
    };
    let d2 = start_with(&*s, "t2", &quoting, None)
        .await
        .expect("started");
    let d3 = start(&*s, "t3", "sid-1")
        .await
        .expect("started")
        .decision_id;

    s.recall("om_t1", CHAT, UnixMs(5_000))
        .await
        .expect("recall");
    let t1 = s.turn("t1").await.expect("read").expect("t1");
    assert_eq!(
        (
            t1.state,
            t1.error.as_deref(),
            t1.finished_at,
            t1.request_text.as_str(),
            t1.job_json.as_str()
        ),
        (
            TurnState::Cancelled,
            Some("the request was recalled"),
            Some(UnixMs(5_000)),
            "",
            "{}"
        ),
        "a queued turn never runs"
    );
    let scrubbed = s.decision(d2.decision_id).await.expect("read").expect("d2");
    let expected = NewDecision {
        request_text: String::new(),
        thread_context: String::new(),
        selected_json: "[]".into(),
        prompt_preview: "[removed: a message in this decision was recalled]".into(),
        source_message_ids: Vec::new(),
        ..quoting
    };
    assert_eq!(
        scrubbed.decision, expected,
        "a decision holding its text is scrubbed"
    );
    let untouched = s.decision(d3).await.expect("read").expect("d3").decision;
    assert_eq!(untouched.request_text, "ask om_t3");

    // A running turn keeps running; only its text goes.
    s.recall("om_t2", CHAT, UnixMs(6_000))
        .await
        .expect("recall");
    let t2 = s.turn("t2").await.expect("read").expect("t2");
    assert_eq!(
        (
            t2.state,
            t2.error,
            t2.request_text.as_str(),
            t2.job_json.as_str()
        ),
        (TurnState::Running, None, "", "{}")
    );
}
both_backends!(
    recall_scrubs_the_decisions_and_turns_holding_the_text,
    recall_reaches_decisions_and_turns
);

async fn purge_keeps_unfinished(db: TestDb) {
    let s = open(&db).await;
    let skipped = NewInboxEvent {
        status: InboxStatus::Skipped,
        ..ev("a", "skipped", None)
    };
    let names = ["done", "failed", "retrying", "processing"];
    let mut batch: Vec<_> = names.iter().map(|id| ev("a", id, None)).collect();
    batch.push(skipped);
    s.insert_inbox_batch(&batch).await.expect("insert");
    let got = s
        .claim_inbox(
            "me",
            UnixMs(2_000),
            60_000,
            ClaimLimits {
                chats: 10,
                per_chat: 10,
            },
            None,
        )
        .await
        .expect("claim");
    let retry = Finish::Retry {
        error: "boom".into(),
        at: UnixMs(3_000),
    };
    let failed = Finish::Failed {
        error: "gave up".into(),
    };
    for (e, outcome) in got.iter().zip([Finish::Done, failed, retry]) {
        s.finish_inbox(&[e.id], &outcome, UnixMs(2_100))
            .await
            .expect("finish");
    }
    // Turns queued at 100: one of each state, and one ended at the cutoff itself.
    for t in ["queued", "running", "succeeded", "failed", "cancelled"] {
        queue(&*s, turn("a", KEY, t)).await;
    }
    queue(
        &*s,
        NewTurn {
            queued_at: UnixMs(5_000),
            ..turn("a", KEY, "edge")
        },
    )
    .await;
    start(&*s, "succeeded", "sid-1").await.expect("started");
    s.complete_turn(&completion("a", "succeeded", None))
        .await
        .expect("complete");
    start(&*s, "running", "sid-1").await.expect("started");
    for (t, state) in [
        ("failed", TurnState::Failed),
        ("cancelled", TurnState::Cancelled),
        ("edge", TurnState::Cancelled),
    ] {
        s.end_turn(t, state, "ended", UnixMs(300))
            .await
            .expect("end");
    }

    s.purge(UnixMs(5_000)).await.expect("purge");
    let mut inbox = Vec::new();
    for id in ["done", "failed", "retrying", "processing", "skipped"] {
        inbox.push(s.inbox_event("a", id).await.expect("read").is_some());
    }
    assert_eq!(
        inbox,
        [false, false, true, true, false],
        "finished inbox rows go, pending and claimed ones stay"
    );
    let mut turns = Vec::new();
    for t in [
        "queued",
        "running",
        "succeeded",
        "failed",
        "cancelled",
        "edge",
    ] {
        turns.push(s.turn(t).await.expect("read").is_some());
    }
    assert_eq!(
        turns,
        [true, true, false, false, false, true],
        "finished turns go, unfinished ones and those of the cutoff stay"
    );
    let session = s.session("a", KEY).await.expect("read");
    assert!(session.is_some(), "sessions are not retention's");
}
both_backends!(
    purge_keeps_unfinished_inbox_rows_and_turns,
    purge_keeps_unfinished
);

async fn purge_cutoff(db: TestDb) {
    let s = open(&db).await;
    let at = |message_id: &str, created_at| NewContextEvent {
        created_at: UnixMs(created_at),
        ..record("a", message_id, HumanMessage)
    };
    write(&*s, &[at("om_old", 4_999), at("om_edge", 5_000)]).await;
    for (message_id, created_at) in [("om_old", 4_999), ("om_edge", 5_000)] {
        let v = NewVerdict {
            created_at: UnixMs(created_at),
            ..verdict("a", message_id)
        };
        s.record_verdict(&v).await.expect("verdict");
        let answer = NewOutbound {
            reply_to: Some(message_id.into()),
            ..reply("a", "an answer", created_at)
        };
        s.record_outbound(&answer).await.expect("reply");
    }
    s.purge(UnixMs(5_000)).await.expect("purge");
    let events = thread_events(&*s, "a", CHAT, ROOT).await;
    let events: Vec<_> = events.iter().map(|e| e.message_id.as_str()).collect();
    assert_eq!(events, ["om_edge"]);
    assert!(verdicts(&*s, "om_old", None).await.is_empty());
    assert_eq!(verdicts(&*s, "om_edge", None).await.len(), 1);
    let replies = s.outbound("a", 10).await.expect("replies");
    let replies: Vec<_> = replies.iter().map(|r| r.reply_to.as_deref()).collect();
    assert_eq!(replies, [Some("om_edge")]);
}
both_backends!(
    purge_deletes_records_verdicts_and_replies_strictly_older_than_the_cutoff,
    purge_cutoff
);

async fn batch_as_step_by_step(db: TestDb) {
    use feishu_bridge::store::{BatchStep, ProcessedBatch};
    let s = open(&db).await;
    let inbox: Vec<_> = (0..3).map(|i| ev("a", &format!("e{i}"), None)).collect();
    s.insert_inbox_batch(&inbox).await.expect("insert");
    let claimed = s
        .claim_inbox(
            "me",
            UnixMs(2_000),
            60_000,
            ClaimLimits {
                chats: 3,
                per_chat: 1,
            },
            None,
        )
        .await
        .expect("claim");
    let done: Vec<i64> = claimed.iter().map(|e| e.id).collect();

    let named = |message_id: &str, name: &str| RouteWrite {
        names: vec![("ou_x".into(), name.into())],
        ..route("a", message_id, vec![record("a", message_id, HumanMessage)])
    };
    let invoked = RouteWrite {
        verdict: NewVerdict {
            verdict: Verdict::Invoked,
            reason: Reason::Mention,
            session_key: Some(KEY.into()),
            ..verdict("a", "om_t1")
        },
        session: Some(session("a", KEY, "sid-1", 100)),
        turn: Some(turn("a", KEY, "t1")),
        ..route("a", "om_t1", vec![record("a", "om_t1", UserRequest)])
    };
    let steps = vec![
        BatchStep::Route(Box::new(named("om_1", "Old"))),
        BatchStep::Verdict(verdict("a", "om_2")),
        // The same message again (its first verdict and record stand).
        BatchStep::Route(Box::new(named("om_1", "Older"))),
        BatchStep::Route(Box::new(named("om_3", "New"))),
        BatchStep::Recall {
            message_id: "om_3".into(),
            chat_id: CHAT.into(),
        },
        BatchStep::Route(Box::new(invoked)),
    ];
    let out = s
        .record_batch(&ProcessedBatch {
            steps,
            done: done.clone(),
            now: UnixMs(3_000),
        })
        .await
        .expect("batch");
    let fresh: Vec<Option<bool>> = out.iter().map(|r| r.as_ref().map(|r| r.fresh)).collect();
    assert_eq!(
        fresh,
        [Some(true), None, Some(false), Some(true), None, Some(true)]
    );
    let sid = out[5].as_ref().and_then(|r| r.session.as_ref());
    assert_eq!(sid.map(|r| r.session_id.as_str()), Some("sid-1"));

    // One verdict and one record (with one item) per message.
    assert_eq!(verdicts(&*s, "om_1", None).await.len(), 1);
    assert_eq!(verdicts(&*s, "om_2", None).await.len(), 1);
    let one = message_events(&*s, "om_1").await;
    assert_eq!(one.len(), 1);
    assert!(one[0].item_id.is_some());
    // The recall came after its message, in the same transaction.
    assert!(s.is_recalled("om_3").await.expect("read"));
    let three = message_events(&*s, "om_3").await;
    assert_eq!((three.len(), three[0].text.as_str()), (1, ""));
    // The last name learned wins; the turn was queued once.
    assert_eq!(
        s.name_of("a", "ou_x").await.expect("name").as_deref(),
        Some("New")
    );
    assert!(s.turn("t1").await.expect("read").is_some());
    for e in &inbox {
        let row = s
            .inbox_event("a", &e.event_id)
            .await
            .expect("read")
            .expect("stored");
        assert_eq!(row.event.status, InboxStatus::Done);
    }
}
both_backends!(
    a_batch_records_what_its_steps_would_one_by_one_in_one_transaction,
    batch_as_step_by_step
);
