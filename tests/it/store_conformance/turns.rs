//! Turns, from queued to ended: starting with a decision, the answer stored then
//! completed, and the lists that read them.

use feishu_bridge::{
    store::{NewContextEvent, Store, TurnFilter, TurnRow, TurnState},
    util::UnixMs,
    vocab::kinds::EventType::{AgentOutput, HumanMessage},
};

use super::{
    CHAT, KEY, SCOPE, completion, decision, history, open, pending, queue, record, reset, start,
    start_with, turn, write,
};
use crate::{both_backends, support::TestDb};

/// Turn `turn_id`, which must exist.
async fn read(s: &dyn Store, turn_id: &str) -> TurnRow {
    s.turn(turn_id).await.expect("read").expect("the turn")
}

async fn counts(s: &dyn Store) -> (i64, i64) {
    s.turn_counts().await.expect("counts")
}

fn ids(rows: &[TurnRow]) -> Vec<&str> {
    rows.iter().map(|t| t.turn_id.as_str()).collect()
}

/// Ends `turn_id` at 300; whether it was still unfinished.
async fn end(s: &dyn Store, turn_id: &str, state: TurnState, error: &str) -> bool {
    s.end_turn(turn_id, state, error, UnixMs(300))
        .await
        .expect("end")
}

/// The id of `profile`'s record of `message_id`.
async fn event_id(s: &dyn Store, profile: &str, message_id: &str) -> i64 {
    let rows = s.message_events(message_id).await.expect("events");
    let row = rows.iter().find(|r| r.bot_profile == profile);
    row.expect("the record").id
}

/// The decision linked from a's verdict on `om_t1`.
async fn linked(s: &dyn Store) -> Option<i64> {
    let v = s.verdicts("om_t1", Some("a")).await.expect("verdicts");
    v[0].decision_id
}

/// Queues, starts in `session_id`, answers and completes a turn.
async fn answered(s: &dyn Store, profile: &str, key: &str, turn_id: &str, session_id: &str) {
    queue(s, turn(profile, key, turn_id)).await;
    start(s, turn_id, session_id).await.expect("started");
    let answer = format!("answer to {turn_id}");
    s.save_turn_output(turn_id, &answer, None, UnixMs(500))
        .await
        .expect("output");
    s.complete_turn(&completion(profile, turn_id, None))
        .await
        .expect("complete");
}

async fn queued_then_started(db: TestDb) {
    let s = open(&db).await;
    assert!(s.turn("t1").await.expect("read").is_none());
    assert_eq!(counts(&*s).await, (0, 0));
    assert!(s.unfinished_turns().await.expect("unfinished").is_empty());
    queue(&*s, turn("a", KEY, "t1")).await;
    let queued = read(&*s, "t1").await;
    let expected = TurnRow {
        id: queued.id,
        turn_id: "t1".into(),
        profile: "a".into(),
        session_key: KEY.into(),
        session_id: None,
        chat_id: CHAT.into(),
        message_id: "om_t1".into(),
        request_text: "ask t1".into(),
        job_json: "{\"turn\":\"t1\"}".into(),
        state: TurnState::Queued,
        decision_id: None,
        output: None,
        reply_message_id: None,
        card_message_id: None,
        card_id: None,
        working_reaction_id: None,
        error: None,
        lease_owner: Some("replica-a".into()),
        queued_at: UnixMs(100),
        started_at: None,
        answered_at: None,
        finished_at: None,
        chain_id: None,
        hop: None,
        handoff_json: None,
    };
    assert_eq!(queued, expected);
    assert_eq!(counts(&*s).await, (1, 0));
    let unfinished = s.unfinished_turns().await.expect("unfinished");
    assert_eq!(unfinished, std::slice::from_ref(&expected));

    let started = start(&*s, "t1", "sid-7").await.expect("started");
    assert_eq!(started.row_id, queued.id);
    let running = read(&*s, "t1").await;
    let expected = TurnRow {
        session_id: Some("sid-7".into()),
        state: TurnState::Running,
        decision_id: Some(started.decision_id),
        started_at: Some(UnixMs(200)),
        ..expected
    };
    assert_eq!(running, expected, "running in its decision's session");
    let made = s.decision(started.decision_id).await.expect("read");
    let made = made.expect("the decision").decision;
    assert_eq!(
        (made.message_id.as_str(), made.session_id.as_str()),
        ("om_t1", "sid-7")
    );
    assert_eq!(linked(&*s).await, Some(started.decision_id));
    let of_decision = s.turn_of_decision(started.decision_id).await.expect("read");
    assert_eq!(of_decision, Some(expected.clone()));
    assert_eq!(counts(&*s).await, (0, 1));

    // Started again (say, by recovery), or a turn that does not exist: nothing is kept.
    assert!(start(&*s, "t1", "sid-8").await.is_none());
    let stray = decision("a", "om_t1", "sid-9");
    assert!(start_with(&*s, "nope", &stray, None).await.is_none());
    assert_eq!(read(&*s, "t1").await, expected);
    assert_eq!(db.count("thread_context_decisions").await, 1);
    assert_eq!(linked(&*s).await, Some(started.decision_id));

    // A decision recorded on its own is no turn's.
    let alone = s.record_decision(&stray).await.expect("record");
    assert!(s.turn_of_decision(alone).await.expect("read").is_none());
}
both_backends!(
    a_turn_is_queued_then_started_once_with_its_decision,
    queued_then_started
);

async fn consumes_history(db: TestDb) {
    let s = open(&db).await;
    let other_scope = NewContextEvent {
        history_scope: "chat:oc_2".into(),
        ..record("a", "om_5", HumanMessage)
    };
    write(
        &*s,
        &[
            record("a", "om_1", HumanMessage),
            record("a", "om_2", HumanMessage),
            record("a", "om_3", HumanMessage),
            record("b", "om_4", HumanMessage),
            other_scope,
        ],
    )
    .await;
    for t in ["t1", "t2", "t3"] {
        queue(&*s, turn("a", KEY, t)).await;
    }
    let up_to = event_id(&*s, "a", "om_2").await;
    let d1 = decision("a", "om_t1", "sid-1");
    let started = start_with(&*s, "t1", &d1, Some(("a", SCOPE, up_to))).await;
    assert!(started.is_some());
    let left = [
        pending(&*s, "a", SCOPE).await,
        pending(&*s, "b", SCOPE).await,
        pending(&*s, "a", "chat:oc_2").await,
    ];
    assert_eq!(
        left,
        [1, 1, 1],
        "consumed up to its snapshot, in its scope only"
    );
    let rest = s.pending_candidates("a", SCOPE, 10).await.expect("pending");
    assert_eq!(rest.len(), 1);
    assert_eq!(rest[0].message_id, "om_3");

    // A later start with an older snapshot brings nothing back (once t1 ended: one
    // running turn per session).
    assert!(end(&*s, "t1", TurnState::Failed, "agent down").await);
    let older = event_id(&*s, "a", "om_1").await;
    let d2 = decision("a", "om_t2", "sid-1");
    let started = start_with(&*s, "t2", &d2, Some(("a", SCOPE, older))).await;
    assert!(started.is_some());
    assert_eq!(pending(&*s, "a", SCOPE).await, 1);

    // A start that does not happen consumes nothing.
    assert!(end(&*s, "t3", TurnState::Cancelled, "stopped").await);
    let newest = event_id(&*s, "a", "om_3").await;
    let d3 = decision("a", "om_t3", "sid-1");
    let started = start_with(&*s, "t3", &d3, Some(("a", SCOPE, newest))).await;
    assert!(started.is_none());
    assert_eq!(pending(&*s, "a", SCOPE).await, 1);
}
both_backends!(
    starting_consumes_pending_history_up_to_its_snapshot_and_never_back,
    consumes_history
);

async fn ends_once(db: TestDb) {
    let s = open(&db).await;
    queue(&*s, turn("a", KEY, "t1")).await;
    queue(&*s, turn("a", KEY, "t2")).await;
    start(&*s, "t2", "sid-1").await.expect("started");
    assert!(end(&*s, "t1", TurnState::Cancelled, "stopped by the user").await);
    assert!(end(&*s, "t2", TurnState::Failed, "agent down").await);
    let ended = |t: TurnRow| (t.state, t.error, t.finished_at);
    let first = [ended(read(&*s, "t1").await), ended(read(&*s, "t2").await)];
    assert_eq!(
        first,
        [
            (
                TurnState::Cancelled,
                Some("stopped by the user".into()),
                Some(UnixMs(300))
            ),
            (
                TurnState::Failed,
                Some("agent down".into()),
                Some(UnixMs(300))
            ),
        ]
    );

    // Ending again, or a turn that does not exist: `false`, and nothing changes.
    let again = s
        .end_turn("t1", TurnState::Failed, "late", UnixMs(900))
        .await
        .expect("end");
    assert!(!again);
    assert!(!end(&*s, "t2", TurnState::Cancelled, "late").await);
    assert!(!end(&*s, "nope", TurnState::Failed, "late").await);
    let now = [ended(read(&*s, "t1").await), ended(read(&*s, "t2").await)];
    assert_eq!(now, first, "the first end stands");
    assert!(
        start(&*s, "t1", "sid-1").await.is_none(),
        "a cancelled turn never starts"
    );
    s.save_turn_output("t2", "too late", None, UnixMs(600))
        .await
        .expect("output");
    let t2 = read(&*s, "t2").await;
    assert_eq!(
        (t2.output, t2.answered_at),
        (None, None),
        "an ended turn takes no answer"
    );
    assert!(s.unfinished_turns().await.expect("unfinished").is_empty());
    assert_eq!(counts(&*s).await, (0, 0));
}
both_backends!(a_turn_ends_once, ends_once);

async fn answer_then_complete(db: TestDb) {
    let s = open(&db).await;
    queue(&*s, turn("a", KEY, "t1")).await;
    queue(&*s, turn("a", KEY, "t2")).await;
    start(&*s, "t1", "sid-1").await.expect("started");
    s.set_turn_card("t1", "om_card", Some("7355439197428236291"))
        .await
        .expect("card");
    s.set_turn_card("t2", "om_card_2", None)
        .await
        .expect("a card posted as a message");
    s.set_turn_card("nope", "om_card", None)
        .await
        .expect("no such turn");
    s.save_turn_output("t1", "the answer", None, UnixMs(500))
        .await
        .expect("output");
    s.save_turn_output("t2", "early", None, UnixMs(500))
        .await
        .expect("output");
    let t1 = read(&*s, "t1").await;
    assert_eq!(t1.card_id.as_deref(), Some("7355439197428236291"));
    let t2 = read(&*s, "t2").await;
    assert_eq!(
        (t2.card_message_id.as_deref(), t2.card_id.as_deref()),
        (Some("om_card_2"), None)
    );
    assert_eq!(
        (
            t1.state,
            t1.card_message_id.as_deref(),
            t1.output.as_deref(),
            t1.answered_at
        ),
        (
            TurnState::Running,
            Some("om_card"),
            Some("the answer"),
            Some(UnixMs(500))
        ),
        "stored before it is posted"
    );
    assert_eq!(
        read(&*s, "t2").await.output,
        None,
        "a queued turn has no answer yet"
    );

    // Completed twice: a retry after an outcome that was not recorded.
    let done = completion("a", "t1", None);
    s.complete_turn(&done).await.expect("complete");
    s.complete_turn(&done).await.expect("complete again");
    let t1 = read(&*s, "t1").await;
    assert_eq!(
        (
            t1.state,
            t1.reply_message_id.as_deref(),
            t1.finished_at,
            t1.error,
            t1.output.as_deref()
        ),
        (
            TurnState::Succeeded,
            Some("om_reply_t1"),
            Some(UnixMs(600)),
            None,
            Some("the answer")
        )
    );
    let output = s.message_events("om_reply_t1").await.expect("events");
    let output: Vec<_> = output
        .iter()
        .map(|r| (r.bot_profile.as_str(), r.event_type))
        .collect();
    assert_eq!(output, [("a", AgentOutput)], "one agent_output record");

    // A turn that ended meanwhile stays ended.
    start(&*s, "t2", "sid-1").await.expect("started");
    assert!(end(&*s, "t2", TurnState::Cancelled, "stopped").await);
    s.complete_turn(&completion("a", "t2", None))
        .await
        .expect("complete");
    let t2 = read(&*s, "t2").await;
    assert_eq!(
        (t2.state, t2.reply_message_id),
        (TurnState::Cancelled, None)
    );
    assert_eq!(counts(&*s).await, (0, 0));
}
both_backends!(
    an_answer_is_stored_while_running_and_completed_once,
    answer_then_complete
);

async fn topic_root_flag(db: TestDb) {
    let s = open(&db).await;
    queue(&*s, turn("a", KEY, "t1")).await;
    queue(&*s, turn("a", KEY, "t2")).await;
    start(&*s, "t1", "sid-1").await.expect("started");
    let delivered = Some(("a", KEY, "sid-1"));
    s.complete_turn(&completion("a", "t1", delivered))
        .await
        .expect("complete");
    let mapping = s.session("a", KEY).await.expect("read").expect("session");
    assert!(mapping.topic_root_prompt_delivered);

    // t2 runs in sid-1 too, but the user starts a new session before it answers.
    start(&*s, "t2", "sid-1").await.expect("started");
    s.reset_session(&reset("a", KEY, SCOPE, "sid-2", UnixMs(550)))
        .await
        .expect("reset")
        .expect("the session");
    s.complete_turn(&completion("a", "t2", delivered))
        .await
        .expect("complete");
    let mapping = s.session("a", KEY).await.expect("read").expect("session");
    assert_eq!(
        (
            mapping.session_id.as_str(),
            mapping.topic_root_prompt_delivered
        ),
        ("sid-2", false),
        "the new session has not seen the root"
    );
    assert_eq!(read(&*s, "t2").await.state, TurnState::Succeeded);
}
both_backends!(
    completion_marks_the_topic_root_only_in_the_session_the_turn_ran_in,
    topic_root_flag
);

async fn lists(db: TestDb) {
    let s = open(&db).await;
    let made = [
        ("a", KEY, "t1"),
        ("a", KEY, "t2"),
        ("a", "dm:ou_alice", "t3"),
        ("b", KEY, "t4"),
        ("a", KEY, "t5"),
    ];
    for (profile, key, id) in made {
        queue(&*s, turn(profile, key, id)).await;
    }
    start(&*s, "t2", "sid-1").await.expect("started");
    start(&*s, "t4", "sid-1").await.expect("started");
    assert!(end(&*s, "t1", TurnState::Failed, "boom").await);

    let filters = [
        (None, None, None, 10),
        (Some("a"), None, None, 10),
        (Some("a"), Some(KEY), None, 10),
        (None, None, Some("running"), 10),
        (Some("a"), Some(KEY), Some("queued"), 10),
        (None, None, None, 2),
        (Some("c"), None, None, 10),
    ];
    let mut listed = Vec::new();
    for (profile, key, state, limit) in filters {
        let filter = TurnFilter {
            profile: profile.map(str::to_string),
            session_key: key.map(str::to_string),
            state: state.map(str::to_string),
            limit,
        };
        let rows = s.turns(&filter).await.expect("turns");
        listed.push(ids(&rows).join(","));
    }
    assert_eq!(
        listed,
        [
            "t5,t4,t3,t2,t1",
            "t5,t3,t2,t1",
            "t5,t2,t1",
            "t4,t2",
            "t5",
            "t5,t4",
            ""
        ],
        "newest first"
    );
    let unfinished = s.unfinished_turns().await.expect("unfinished");
    assert_eq!(ids(&unfinished), ["t2", "t3", "t4", "t5"], "in queue order");
    assert_eq!(counts(&*s).await, (2, 2));
}
both_backends!(turn_lists_filter_by_profile_session_and_state, lists);

async fn session_history(db: TestDb) {
    let s = open(&db).await;
    for t in ["t1", "t2", "t3"] {
        answered(&*s, "a", KEY, t, "sid-1").await;
    }
    queue(&*s, turn("a", KEY, "t4")).await;
    start(&*s, "t4", "sid-1").await.expect("started");
    assert!(end(&*s, "t4", TurnState::Failed, "agent down").await);
    answered(&*s, "a", KEY, "t5", "sid-0").await;
    answered(&*s, "b", KEY, "t6", "sid-1").await;
    answered(&*s, "a", "dm:ou_alice", "t7", "sid-1").await;
    queue(&*s, turn("a", KEY, "now")).await;
    let current = start(&*s, "now", "sid-1").await.expect("started");
    assert!(end(&*s, "now", TurnState::Failed, "agent down").await);
    answered(&*s, "a", KEY, "t8", "sid-1").await;

    let read_back = |session_id: &'static str, before: i64, limit: i64| {
        let s = s.clone();
        async move {
            let rows = s
                .session_history(&history("a", session_id, before, limit))
                .await
                .expect("history");
            ids(&rows).join(",")
        }
    };
    let before = current.row_id;
    assert_eq!(
        read_back("sid-1", before, 10).await,
        "t1,t2,t3",
        "oldest first"
    );
    assert_eq!(
        read_back("sid-1", before, 2).await,
        "t2,t3",
        "the latest ones"
    );
    let t2 = read(&*s, "t2").await;
    assert_eq!(read_back("sid-1", t2.id, 10).await, "t1");
    assert_eq!(read_back("sid-0", before, 10).await, "t5");
    assert_eq!(read_back("sid-9", before, 10).await, "");
    let rows = s
        .session_history(&history("a", "sid-1", before, 1))
        .await
        .expect("history");
    assert_eq!(
        (rows[0].request_text.as_str(), rows[0].output.as_deref()),
        ("ask t3", Some("answer to t3")),
        "what the agent is handed again"
    );
}
both_backends!(
    session_history_is_the_latest_answered_turns_of_the_session_oldest_first,
    session_history
);

async fn working_reactions(db: TestDb) {
    let s = open(&db).await;
    for id in ["t1", "t2", "t3"] {
        queue(&*s, turn("a", KEY, id)).await;
    }
    let none: Vec<TurnRow> = Vec::new();
    assert_eq!(s.ended_turn_reactions(10).await.expect("read"), none);
    s.record_turn_reaction("t1", "r1").await.expect("record");
    s.record_turn_reaction("t2", "r2").await.expect("record");
    s.record_turn_reaction("nope", "r9")
        .await
        .expect("no such turn");
    assert_eq!(
        read(&*s, "t1").await.working_reaction_id.as_deref(),
        Some("r1")
    );
    assert!(
        s.ended_turn_reactions(10).await.expect("read").is_empty(),
        "unfinished turns keep theirs"
    );

    // Ended: listed until cleared, oldest first.
    assert!(end(&*s, "t2", TurnState::Cancelled, "stopped").await);
    assert!(end(&*s, "t1", TurnState::Failed, "failed").await);
    assert!(end(&*s, "t3", TurnState::Failed, "failed").await);
    let left = s.ended_turn_reactions(10).await.expect("read");
    assert_eq!(ids(&left), ["t1", "t2"]);
    assert_eq!(ids(&s.ended_turn_reactions(1).await.expect("read")), ["t1"]);

    // Cleared only while it is still the reaction recorded.
    s.clear_turn_reaction("t1", "r-other").await.expect("clear");
    assert_eq!(
        read(&*s, "t1").await.working_reaction_id.as_deref(),
        Some("r1")
    );
    s.clear_turn_reaction("t1", "r1").await.expect("clear");
    assert_eq!(read(&*s, "t1").await.working_reaction_id, None);
    assert_eq!(
        ids(&s.ended_turn_reactions(10).await.expect("read")),
        ["t2"]
    );
}
both_backends!(
    a_turns_working_reaction_is_kept_until_cleared_and_listed_once_it_ended,
    working_reactions
);
