//! Session mappings: created by routing, listed, rotated by `/new`, and the pending
//! history of their scopes.

use feishu_bridge::{
    store::{NewContextEvent, NewSession, SessionRow, Store},
    util::UnixMs,
    vocab::ChatType,
    vocab::kinds::EventType::{AgentOutput, Command, HumanMessage, TopicRoot, UserRequest},
};

use super::{
    CHAT, KEY, ROOT, SCOPE, completion, map_session, open, pending, queue, record, reset, session,
    start, turn, write,
};
use crate::{both_backends, support::TestDb};

/// The mapping `profile` has under `key`, if any.
async fn mapping(s: &dyn Store, profile: &str, key: &str) -> Option<SessionRow> {
    s.session(profile, key).await.expect("read session")
}

/// `profile/key` of each mapping `sessions` lists.
async fn keys(s: &dyn Store, profile: Option<&str>, chat: Option<&str>) -> Vec<String> {
    let rows = s.sessions(profile, chat).await.expect("sessions");
    rows.into_iter()
        .map(|r| format!("{}/{}", r.profile, r.session_key))
        .collect()
}

async fn created_once(db: TestDb) {
    let s = open(&db).await;
    assert!(mapping(&*s, "a", KEY).await.is_none());
    let created = map_session(&*s, session("a", KEY, "sid-1", 100)).await;
    let expected = SessionRow {
        profile: "a".into(),
        session_key: KEY.into(),
        session_id: "sid-1".into(),
        chat_id: CHAT.into(),
        chat_type: ChatType::Group,
        user_id: Some("ou_alice".into()),
        root_msg_id: Some(ROOT.into()),
        history_scope: SCOPE.into(),
        topic_root_prompt_delivered: false,
        created_at: UnixMs(100),
        updated_at: UnixMs(100),
    };
    assert_eq!(created, expected);
    assert_eq!(mapping(&*s, "a", KEY).await, Some(expected.clone()));

    // A later message of the session touches it; what it would have created is unused.
    let later = NewSession {
        session_id: "sid-other".into(),
        chat_id: "oc_2".into(),
        chat_type: ChatType::P2p,
        user_id: None,
        history_scope: "chat:oc_2".into(),
        ..session("a", KEY, "sid-1", 200)
    };
    let touched = map_session(&*s, later).await;
    let expected = SessionRow {
        updated_at: UnixMs(200),
        ..expected
    };
    assert_eq!(touched, expected);
    assert_eq!(mapping(&*s, "a", KEY).await, Some(expected));

    // The same key under another profile is a mapping of its own.
    assert!(mapping(&*s, "b", KEY).await.is_none());
    map_session(&*s, session("b", KEY, "sid-b", 300)).await;
    let b = mapping(&*s, "b", KEY).await.expect("b's session");
    let a = mapping(&*s, "a", KEY).await.expect("a's session");
    assert_eq!(
        (a.session_id, b.session_id),
        ("sid-1".into(), "sid-b".into())
    );
}
both_backends!(a_session_is_created_once_then_only_touched, created_once);

async fn listed(db: TestDb) {
    let s = open(&db).await;
    let made = [
        ("a", "k1", CHAT, 100),
        ("a", "k3", CHAT, 300),
        ("a", "k2", "oc_2", 300),
        ("b", "k4", CHAT, 200),
    ];
    for (profile, key, chat, now) in made {
        let new = NewSession {
            chat_id: chat.into(),
            ..session(profile, key, "sid-1", now)
        };
        map_session(&*s, new).await;
    }
    // Most recently used first; the key breaks a tie.
    assert_eq!(
        keys(&*s, None, None).await,
        ["a/k2", "a/k3", "b/k4", "a/k1"]
    );
    assert_eq!(keys(&*s, Some("a"), None).await, ["a/k2", "a/k3", "a/k1"]);
    assert_eq!(keys(&*s, None, Some(CHAT)).await, ["a/k3", "b/k4", "a/k1"]);
    assert_eq!(keys(&*s, Some("a"), Some(CHAT)).await, ["a/k3", "a/k1"]);
    assert!(keys(&*s, Some("c"), None).await.is_empty());
    assert!(keys(&*s, Some("b"), Some("oc_2")).await.is_empty());
}
both_backends!(
    sessions_filter_by_profile_and_chat_most_recent_first,
    listed
);

async fn reset_rotates(db: TestDb) {
    let s = open(&db).await;
    // A session whose topic root was delivered in its first turn.
    queue(&*s, turn("a", KEY, "t1")).await;
    start(&*s, "t1", "sid-1").await.expect("started");
    let delivered = completion("a", "t1", Some(("a", KEY, "sid-1")));
    s.complete_turn(&delivered).await.expect("complete");
    let before = mapping(&*s, "a", KEY).await.expect("session");
    assert!(before.topic_root_prompt_delivered);
    let other_scope = NewContextEvent {
        history_scope: "chat:oc_2".into(),
        ..record("a", "om_4", HumanMessage)
    };
    write(
        &*s,
        &[
            other_scope,
            record("a", "om_1", TopicRoot),
            record("a", "om_2", HumanMessage),
            record("a", "om_3", HumanMessage),
            record("b", "om_5", HumanMessage),
        ],
    )
    .await;
    assert_eq!(pending(&*s, "a", SCOPE).await, 3);

    let rotated = s
        .reset_session(&reset("a", KEY, SCOPE, "sid-2", UnixMs(500)))
        .await
        .expect("reset")
        .expect("the session");
    let expected = SessionRow {
        session_id: "sid-2".into(),
        topic_root_prompt_delivered: false,
        updated_at: UnixMs(500),
        ..before
    };
    assert_eq!(rotated, expected);
    assert_eq!(mapping(&*s, "a", KEY).await, Some(expected));
    let counts = [
        pending(&*s, "a", SCOPE).await,
        pending(&*s, "a", "chat:oc_2").await,
        pending(&*s, "b", SCOPE).await,
    ];
    assert_eq!(counts, [0, 1, 1], "only this profile's scope is cleared");
    write(&*s, &[record("a", "om_6", HumanMessage)]).await;
    assert_eq!(pending(&*s, "a", SCOPE).await, 1, "what follows is pending");

    // No such session: nothing rotates and no history is cleared.
    let missing = s
        .reset_session(&reset("a", "group:nope", "chat:oc_2", "sid-x", UnixMs(600)))
        .await
        .expect("reset");
    assert!(missing.is_none());
    assert!(mapping(&*s, "a", "group:nope").await.is_none());
    assert_eq!(pending(&*s, "a", "chat:oc_2").await, 1);
}
both_backends!(
    reset_rotates_the_session_and_clears_only_its_scope,
    reset_rotates
);

async fn pending_counts(db: TestDb) {
    let s = open(&db).await;
    assert_eq!(pending(&*s, "a", SCOPE).await, 0);
    write(
        &*s,
        &[
            record("a", "om_1", TopicRoot),
            record("a", "om_2", HumanMessage),
            record("a", "om_3", UserRequest),
            record("a", "om_4", AgentOutput),
            record("a", "om_5", Command),
            record("a", "om_6", HumanMessage),
            record("b", "om_7", HumanMessage),
        ],
    )
    .await;
    assert_eq!(pending(&*s, "a", SCOPE).await, 3);
    s.recall("om_6", CHAT, UnixMs(2_000)).await.expect("recall");
    assert_eq!(
        pending(&*s, "a", SCOPE).await,
        2,
        "topic roots and discussion, not recalled"
    );
    assert_eq!(pending(&*s, "b", SCOPE).await, 1);
    assert_eq!(pending(&*s, "a", "chat:oc_9").await, 0);
}
both_backends!(
    pending_history_counts_observed_messages_of_one_profile_and_scope,
    pending_counts
);
