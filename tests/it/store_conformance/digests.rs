//! The daily digest as stored: runs claimed once per date, a run's digests stored in one
//! transaction, a session's transcript since its digest mark, the reset that follows a
//! written digest, and a digest's status set afterwards.

use feishu_bridge::{
    store::{
        ContextEventRow, DigestReason, DigestReset, DigestRow, DigestRunEnd, DigestRunRow,
        DigestStatus, DigestTrigger, NewContextEvent, NewDigest, NewDigestRun, SessionRow, Store,
        TranscriptQuery,
    },
    util::UnixMs,
    vocab::kinds::EventType::{AgentOutput, Command, HumanMessage, TopicRoot, UserRequest},
};

use super::{
    CHAT, KEY, ROOT, SCOPE, event_log::kinds, map_session, open, pending, record, reset, said_at,
    session, write,
};
use crate::{
    both_backends,
    support::{Kind, TestDb},
};

/// The date runs and digests are of unless a test says otherwise.
const DATE: &str = "2026-12-02";
/// The zone every run is in.
const TZ: &str = "Asia/Shanghai";
/// A direct session's key (matched by `session_name` alone).
const DM: &str = "p2p:ou_alice";
/// A `thread:` session's key: the thread [`ROOT`] of [`CHAT`].
const THREAD: &str = "thread:om_root";

/// A run of `date` started by `trigger` at `started_at`.
fn run(date: &str, trigger: DigestTrigger, started_at: i64) -> NewDigestRun {
    NewDigestRun {
        date: date.into(),
        trigger,
        timezone: TZ.into(),
        started_at: UnixMs(started_at),
    }
}

/// Claims `date` for a run by `trigger` at `started_at`: whether it was won.
async fn claim(s: &dyn Store, date: &str, trigger: DigestTrigger, started_at: i64) -> bool {
    s.claim_digest_run(&run(date, trigger, started_at))
        .await
        .expect("claim")
}

async fn run_of(s: &dyn Store, date: &str) -> Option<DigestRunRow> {
    s.digest_run(date).await.expect("read the run")
}

async fn latest(s: &dyn Store) -> Option<DigestRunRow> {
    s.latest_digest_run().await.expect("read the latest run")
}

/// A written, summarized digest of `profile`'s session `key` (id `sid-1`, in [`CHAT`])
/// on [`DATE`], covering records up to `last_event_id`, stored at 2 000.
fn digest(profile: &str, key: &str, last_event_id: i64) -> NewDigest {
    NewDigest {
        date: DATE.into(),
        profile: profile.into(),
        session_key: key.into(),
        session_id: "sid-1".into(),
        chat_id: CHAT.into(),
        chars: 120,
        messages: 4,
        last_event_id,
        summary: Some(format!("summary of {profile}/{key}")),
        status: DigestStatus::Written,
        reason: DigestReason::Summarized,
        detail: None,
        now: UnixMs(2_000),
    }
}

/// The row `d` is stored as, with `id`.
fn stored(id: i64, d: &NewDigest) -> DigestRow {
    DigestRow {
        id,
        date: d.date.clone(),
        profile: d.profile.clone(),
        session_key: d.session_key.clone(),
        session_id: d.session_id.clone(),
        chat_id: d.chat_id.clone(),
        chars: d.chars,
        messages: d.messages,
        last_event_id: d.last_event_id,
        summary: d.summary.clone(),
        status: d.status,
        reason: d.reason,
        detail: d.detail.clone(),
        new_session_id: None,
        created_at: d.now,
        updated_at: d.now,
    }
}

async fn digests_of(s: &dyn Store, date: &str) -> Vec<DigestRow> {
    s.digests_of(date).await.expect("read digests")
}

/// The records a digest of `session` reads, with the thread root and scope it names.
async fn transcript(
    s: &dyn Store,
    session: &SessionRow,
    thread_root: Option<&str>,
    scope: Option<&str>,
) -> Vec<ContextEventRow> {
    let q = TranscriptQuery {
        session,
        thread_root,
        scope,
    };
    s.digest_transcript(&q).await.expect("transcript")
}

/// Each record's message id.
fn said(rows: &[ContextEventRow]) -> Vec<&str> {
    rows.iter().map(|r| r.message_id.as_str()).collect()
}

/// `e`, recorded under session `key`.
fn named(key: &str, e: NewContextEvent) -> NewContextEvent {
    NewContextEvent {
        session_name: Some(key.into()),
        ..e
    }
}

/// `e`, in thread `root` of `chat`.
fn in_thread(chat: &str, root: &str, e: NewContextEvent) -> NewContextEvent {
    NewContextEvent {
        chat_id: chat.into(),
        root_msg_id: root.into(),
        ..e
    }
}

/// `e`, in history scope `scope`.
fn in_scope(scope: &str, e: NewContextEvent) -> NewContextEvent {
    NewContextEvent {
        history_scope: scope.into(),
        ..e
    }
}

/// Makes the database refuse every update of a digest (the last statement of a reset).
async fn refuse_digest_updates(db: &TestDb) {
    match db.kind {
        Kind::Sqlite => {
            db.exec(&["CREATE TRIGGER refuse_digest BEFORE UPDATE ON digests \
                   BEGIN SELECT RAISE(ABORT, 'digest updates refused'); END"])
                .await;
        }
        Kind::Postgres => {
            db.exec(&[
                "CREATE FUNCTION refuse_digest() RETURNS trigger LANGUAGE plpgsql AS $$ \
                     BEGIN RAISE EXCEPTION 'digest updates refused'; END $$",
                "CREATE TRIGGER refuse_digest BEFORE UPDATE ON digests \
                     FOR EACH ROW EXECUTE FUNCTION refuse_digest()",
            ])
            .await;
        }
    }
}

/// Undoes [`refuse_digest_updates`].
async fn allow_digest_updates(db: &TestDb) {
    match db.kind {
        Kind::Sqlite => db.exec(&["DROP TRIGGER refuse_digest"]).await,
        Kind::Postgres => db.exec(&["DROP TRIGGER refuse_digest ON digests"]).await,
    }
}

async fn claimed_once(db: TestDb) {
    use DigestTrigger::{Manual, Schedule};
    let s = open(&db).await;
    assert!(latest(&*s).await.is_none(), "no run yet");
    assert!(
        claim(&*s, DATE, Schedule, 1_000).await,
        "the first claim wins"
    );
    assert!(!claim(&*s, DATE, Schedule, 1_500).await, "once per date");
    assert!(
        !claim(&*s, DATE, Manual, 2_000).await,
        "whatever starts the second"
    );
    let claimed = DigestRunRow {
        date: DATE.into(),
        trigger: Schedule,
        timezone: TZ.into(),
        started_at: UnixMs(1_000),
        finished_at: None,
        sessions: 0,
        reset: 0,
        kept: 0,
        failed: 0,
        file: None,
    };
    assert_eq!(
        run_of(&*s, DATE).await,
        Some(claimed.clone()),
        "the refused claims changed nothing"
    );
    assert!(run_of(&*s, "2026-12-03").await.is_none());
    assert_eq!(latest(&*s).await, Some(claimed.clone()));

    // The latest by start, not by date.
    assert!(claim(&*s, "2026-12-01", Manual, 3_000).await);
    assert!(claim(&*s, "2026-12-03", Schedule, 2_500).await);
    let newest = latest(&*s).await.expect("a run");
    assert_eq!(
        (newest.date.as_str(), newest.trigger, newest.started_at),
        ("2026-12-01", Manual, UnixMs(3_000))
    );

    let end = DigestRunEnd {
        date: DATE,
        finished_at: UnixMs(5_000),
        sessions: 6,
        reset: 3,
        kept: 2,
        failed: 1,
        file: Some("/var/digests/2026-12-02.md"),
    };
    s.finish_digest_run(&end).await.expect("finish");
    let finished = DigestRunRow {
        finished_at: Some(UnixMs(5_000)),
        sessions: 6,
        reset: 3,
        kept: 2,
        failed: 1,
        file: Some("/var/digests/2026-12-02.md".into()),
        ..claimed
    };
    assert_eq!(run_of(&*s, DATE).await, Some(finished));
    let others = [
        run_of(&*s, "2026-12-01").await.expect("run"),
        run_of(&*s, "2026-12-03").await.expect("run"),
    ];
    assert!(
        others
            .iter()
            .all(|r| r.finished_at.is_none() && r.sessions == 0),
        "only that date's run finished"
    );

    // A run without a file.
    let end = DigestRunEnd {
        date: "2026-12-01",
        finished_at: UnixMs(6_000),
        file: None,
        ..end
    };
    s.finish_digest_run(&end).await.expect("finish");
    let run = run_of(&*s, "2026-12-01").await.expect("run");
    assert_eq!((run.finished_at, run.file), (Some(UnixMs(6_000)), None));
}
both_backends!(a_date_is_claimed_once_and_its_run_reads_back, claimed_once);

async fn recorded_together(db: TestDb) {
    let s = open(&db).await;
    assert!(claim(&*s, DATE, DigestTrigger::Manual, 1_000).await);
    let batch = [
        NewDigest {
            chars: 12,
            messages: 1,
            summary: None,
            reason: DigestReason::Short,
            ..digest("b", KEY, 40)
        },
        digest("a", DM, 30),
        NewDigest {
            session_id: "sid-7".into(),
            summary: None,
            status: DigestStatus::Kept,
            reason: DigestReason::NoApiKey,
            detail: Some("set FEISHU_BRIDGE_DIGEST_API_KEY".into()),
            now: UnixMs(2_500),
            ..digest("a", KEY, 20)
        },
    ];
    let ids = s.record_digests(&batch).await.expect("record");
    assert_eq!(ids.len(), 3);
    assert!(ids.windows(2).all(|w| w[0] < w[1]), "ids in order: {ids:?}");
    let rows = digests_of(&*s, DATE).await;
    let expected = [
        stored(ids[2], &batch[2]),
        stored(ids[1], &batch[1]),
        stored(ids[0], &batch[0]),
    ];
    assert_eq!(rows, expected, "by profile, then session key");
    assert!(rows[2].summary.is_none() && rows[1].summary.is_some());
    assert!(digests_of(&*s, "2026-12-03").await.is_empty());
    let none = s.record_digests(&[]).await.expect("record nothing");
    assert!(none.is_empty());

    // A batch the database refuses part-way stores none of it: its second digest is
    // the first's session again, …
    const NEXT: &str = "2026-12-03";
    assert!(claim(&*s, NEXT, DigestTrigger::Schedule, 3_000).await);
    let first = NewDigest {
        date: NEXT.into(),
        ..digest("a", KEY, 50)
    };
    let again = NewDigest {
        session_id: "sid-other".into(),
        ..first.clone()
    };
    let refused = s.record_digests(&[first.clone(), again]).await;
    assert!(refused.is_err(), "a session's second digest of a date");
    assert!(digests_of(&*s, NEXT).await.is_empty(), "none stored");
    // … or a digest stored before.
    let fresh = NewDigest {
        date: NEXT.into(),
        ..digest("a", DM, 60)
    };
    let refused = s.record_digests(&[fresh.clone(), batch[1].clone()]).await;
    assert!(refused.is_err(), "a digest of a stored session and date");
    assert!(digests_of(&*s, NEXT).await.is_empty(), "none stored");
    assert_eq!(
        digests_of(&*s, DATE).await,
        expected,
        "the stored ones stay"
    );
    // Neither refused batch left its first digest behind: both store now.
    let ids = s.record_digests(&[first, fresh]).await.expect("record");
    let keys: Vec<_> = digests_of(&*s, NEXT)
        .await
        .into_iter()
        .map(|d| (d.id, d.session_key))
        .collect();
    assert_eq!(keys, [(ids[0], KEY.to_string()), (ids[1], DM.to_string())]);
}
both_backends!(
    a_runs_digests_are_stored_together_or_not_at_all,
    recorded_together
);

async fn own_records(db: TestDb) {
    let s = open(&db).await;
    let dm = map_session(&*s, session("a", DM, "sid-1", 100)).await;
    let b_dm = map_session(&*s, session("b", DM, "sid-b", 100)).await;
    // Every record shares the session's chat, thread and scope: only `session_name`
    // makes one the session's. Written out of said order.
    write(
        &*s,
        &[
            said_at(3_000, named(DM, record("a", "om_3", HumanMessage))),
            said_at(1_000, named(DM, record("a", "om_1", UserRequest))),
            said_at(2_000, named(DM, record("a", "om_2b", AgentOutput))),
            said_at(2_000, named(DM, record("a", "om_2a", HumanMessage))),
            said_at(1_500, record("a", "om_unnamed", HumanMessage)),
            said_at(
                1_500,
                named("p2p:ou_bob", record("a", "om_bob", HumanMessage)),
            ),
            said_at(1_500, named(DM, record("a", "om_cmd", Command))),
            said_at(2_500, named(DM, record("a", "om_gone", HumanMessage))),
            said_at(1_500, named(DM, record("b", "om_b", HumanMessage))),
        ],
    )
    .await;
    let before = transcript(&*s, &dm, None, None).await;
    assert_eq!(said(&before), ["om_1", "om_2a", "om_2b", "om_gone", "om_3"]);
    s.recall("om_gone", CHAT, UnixMs(4_000))
        .await
        .expect("recall");
    let rows = transcript(&*s, &dm, None, None).await;
    assert_eq!(
        kinds(&rows),
        [
            ("om_1", UserRequest),
            ("om_2a", HumanMessage),
            ("om_2b", AgentOutput),
            ("om_3", HumanMessage),
        ],
        "its own records, not recalled, no command, in said order"
    );
    assert!(rows.iter().all(|r| r.bot_profile == "a"));
    assert_eq!(rows[0].text, "text of om_1");
    assert_eq!(rows[1].item_text.as_deref(), Some("item of om_2a"));
    let b_rows = transcript(&*s, &b_dm, None, None).await;
    assert_eq!(
        said(&b_rows),
        ["om_b"],
        "another profile's session of the key"
    );
}
both_backends!(
    a_sessions_transcript_is_its_own_records_in_said_order,
    own_records
);

async fn thread_records(db: TestDb) {
    let s = open(&db).await;
    let thread = map_session(&*s, session("a", THREAD, "sid-1", 100)).await;
    let b_thread = map_session(&*s, session("b", THREAD, "sid-b", 100)).await;
    write(
        &*s,
        &[
            said_at(3_000, record("a", "om_t3", AgentOutput)),
            said_at(1_000, record("a", ROOT, TopicRoot)),
            said_at(2_000, record("a", "om_t2", HumanMessage)),
            said_at(
                2_500,
                named(
                    THREAD,
                    in_thread(CHAT, "om_root2", record("a", "om_named", HumanMessage)),
                ),
            ),
            // The same chat and scope, another thread; the same root id, another chat.
            said_at(
                1_500,
                in_thread(CHAT, "om_root2", record("a", "om_x", HumanMessage)),
            ),
            said_at(
                1_500,
                in_thread("oc_2", ROOT, record("a", "om_y", HumanMessage)),
            ),
            said_at(1_500, record("a", "om_cmd", Command)),
            said_at(1_500, record("a", "om_gone", HumanMessage)),
            said_at(1_500, record("b", "om_b", HumanMessage)),
        ],
    )
    .await;
    s.recall("om_gone", CHAT, UnixMs(4_000))
        .await
        .expect("recall");
    let rows = transcript(&*s, &thread, Some(ROOT), None).await;
    assert_eq!(
        kinds(&rows),
        [
            (ROOT, TopicRoot),
            ("om_t2", HumanMessage),
            ("om_named", HumanMessage),
            ("om_t3", AgentOutput),
        ],
        "its thread's records and its own, not recalled, no command, in said order"
    );
    assert!(rows.iter().all(|r| r.bot_profile == "a"));
    let b_rows = transcript(&*s, &b_thread, Some(ROOT), None).await;
    assert_eq!(said(&b_rows), ["om_b"]);
}
both_backends!(
    a_thread_sessions_transcript_is_its_threads_records,
    thread_records
);

async fn scope_records(db: TestDb) {
    let s = open(&db).await;
    let group = map_session(&*s, session("a", KEY, "sid-1", 100)).await;
    let b_group = map_session(&*s, session("b", KEY, "sid-b", 100)).await;
    write(
        &*s,
        &[
            said_at(
                2_000,
                in_thread(CHAT, "om_root2", record("a", "om_g2", HumanMessage)),
            ),
            said_at(3_000, record("a", "om_q", HumanMessage)),
            said_at(3_000, record("a", "om_q", UserRequest)),
            said_at(1_000, record("a", ROOT, TopicRoot)),
            said_at(
                1_500,
                in_scope(
                    "chat:oc_2",
                    in_thread("oc_2", "om_root3", record("a", "om_z", HumanMessage)),
                ),
            ),
            said_at(1_500, record("a", "om_cmd", Command)),
            said_at(2_500, record("a", "om_gone", HumanMessage)),
            said_at(1_500, record("b", "om_b", HumanMessage)),
        ],
    )
    .await;
    s.recall("om_gone", CHAT, UnixMs(4_000))
        .await
        .expect("recall");
    let rows = transcript(&*s, &group, None, Some(SCOPE)).await;
    assert_eq!(
        kinds(&rows),
        [
            (ROOT, TopicRoot),
            ("om_g2", HumanMessage),
            ("om_q", HumanMessage),
            ("om_q", UserRequest),
        ],
        "its scope's records in every thread, not recalled, no command, in said order"
    );
    assert!(rows.iter().all(|r| r.bot_profile == "a"));
    let b_rows = transcript(&*s, &b_group, None, Some(SCOPE)).await;
    assert_eq!(said(&b_rows), ["om_b"]);
}
both_backends!(
    a_group_sessions_transcript_is_its_scopes_records,
    scope_records
);

async fn reset_after_digest(db: TestDb) {
    let s = open(&db).await;
    assert!(claim(&*s, DATE, DigestTrigger::Schedule, 1_000).await);
    let group = map_session(&*s, session("a", KEY, "sid-1", 100)).await;
    let b_group = map_session(&*s, session("b", KEY, "sid-b", 100)).await;
    write(
        &*s,
        &[
            record("a", "om_1", HumanMessage),
            record("a", "om_2", HumanMessage),
            record("b", "om_b", HumanMessage),
        ],
    )
    .await;
    assert_eq!(pending(&*s, "a", SCOPE).await, 2);
    let day = transcript(&*s, &group, None, Some(SCOPE)).await;
    assert_eq!(said(&day), ["om_1", "om_2"]);
    let last = day.iter().map(|r| r.id).max().expect("records");
    // Said after the digest read the day, before the reset: the next digest's.
    write(&*s, &[record("a", "om_3", HumanMessage)]).await;
    let ids = s
        .record_digests(&[digest("a", KEY, last), digest("b", KEY, last)])
        .await
        .expect("record");

    let r = DigestReset {
        digest_id: ids[0],
        reset: reset("a", KEY, SCOPE, "sid-2", UnixMs(5_000)),
        last_event_id: last,
    };
    assert!(s.digest_reset(&r).await.expect("reset"));
    let after = s.session("a", KEY).await.expect("read").expect("session");
    let expected = SessionRow {
        session_id: "sid-2".into(),
        updated_at: UnixMs(5_000),
        ..group
    };
    assert_eq!(after, expected, "a new session id");
    assert_eq!(pending(&*s, "a", SCOPE).await, 0, "its history cleared");
    let next = transcript(&*s, &after, None, Some(SCOPE)).await;
    assert_eq!(
        said(&next),
        ["om_3"],
        "the next digest starts after the mark"
    );
    // The mark is a record id: a record written later, though said earlier, is next.
    write(&*s, &[said_at(500, record("a", "om_0", HumanMessage))]).await;
    let next = transcript(&*s, &after, None, Some(SCOPE)).await;
    assert_eq!(said(&next), ["om_0", "om_3"]);

    let rows = digests_of(&*s, DATE).await;
    let expected = [
        DigestRow {
            status: DigestStatus::Reset,
            new_session_id: Some("sid-2".into()),
            updated_at: UnixMs(5_000),
            ..stored(ids[0], &digest("a", KEY, last))
        },
        stored(ids[1], &digest("b", KEY, last)),
    ];
    assert_eq!(rows, expected, "only that digest is reset");

    // Another profile's session of the same key is untouched.
    let b_after = s.session("b", KEY).await.expect("read").expect("session");
    assert_eq!(b_after, b_group);
    assert_eq!(pending(&*s, "b", SCOPE).await, 1);
    let b_rows = transcript(&*s, &b_after, None, Some(SCOPE)).await;
    assert_eq!(said(&b_rows), ["om_b"]);
}
both_backends!(
    a_digest_reset_rotates_clears_and_moves_the_mark,
    reset_after_digest
);

async fn reset_refused(db: TestDb) {
    let s = open(&db).await;
    assert!(claim(&*s, DATE, DigestTrigger::Schedule, 1_000).await);
    let group = map_session(&*s, session("a", KEY, "sid-1", 100)).await;
    write(
        &*s,
        &[
            record("a", "om_1", HumanMessage),
            record("a", "om_2", HumanMessage),
        ],
    )
    .await;
    let day = transcript(&*s, &group, None, Some(SCOPE)).await;
    let last = day.iter().map(|r| r.id).max().expect("records");
    let ids = s
        .record_digests(&[digest("a", KEY, last)])
        .await
        .expect("record");
    let r = DigestReset {
        digest_id: ids[0],
        reset: reset("a", KEY, SCOPE, "sid-2", UnixMs(5_000)),
        last_event_id: last,
    };

    // The database refuses its last statement: nothing before it stays.
    refuse_digest_updates(&db).await;
    assert!(s.digest_reset(&r).await.is_err(), "refused");
    let now = s.session("a", KEY).await.expect("read").expect("session");
    assert_eq!(now, group, "the session id stays");
    assert_eq!(pending(&*s, "a", SCOPE).await, 2, "its history stays");
    let again = transcript(&*s, &group, None, Some(SCOPE)).await;
    assert_eq!(said(&again), ["om_1", "om_2"], "the mark stays");
    let rows = digests_of(&*s, DATE).await;
    assert_eq!(rows, [stored(ids[0], &digest("a", KEY, last))]);

    // Allowed, the same reset goes through.
    allow_digest_updates(&db).await;
    assert!(s.digest_reset(&r).await.expect("reset"));
    let now = s.session("a", KEY).await.expect("read").expect("session");
    assert_eq!(now.session_id, "sid-2");
    assert!(transcript(&*s, &now, None, Some(SCOPE)).await.is_empty());
    assert_eq!(digests_of(&*s, DATE).await[0].status, DigestStatus::Reset);
}
both_backends!(
    a_digest_reset_the_database_refuses_part_way_changes_nothing,
    reset_refused
);

async fn reset_gone(db: TestDb) {
    let s = open(&db).await;
    assert!(claim(&*s, DATE, DigestTrigger::Schedule, 1_000).await);
    const GONE_SCOPE: &str = "p2p:ou_alice";
    write(
        &*s,
        &[
            in_scope(GONE_SCOPE, named(DM, record("a", "om_1", HumanMessage))),
            in_scope(GONE_SCOPE, named(DM, record("a", "om_2", HumanMessage))),
        ],
    )
    .await;
    assert_eq!(pending(&*s, "a", GONE_SCOPE).await, 2);
    let last = s.message_events("om_2").await.expect("events")[0].id;
    let ids = s
        .record_digests(&[digest("a", DM, last)])
        .await
        .expect("record");
    let r = DigestReset {
        digest_id: ids[0],
        reset: reset("a", DM, GONE_SCOPE, "sid-2", UnixMs(5_000)),
        last_event_id: last,
    };
    assert!(!s.digest_reset(&r).await.expect("reset"), "no such session");
    assert!(s.session("a", DM).await.expect("read").is_none());
    assert_eq!(pending(&*s, "a", GONE_SCOPE).await, 2, "its history stays");
    assert_eq!(
        digests_of(&*s, DATE).await,
        [stored(ids[0], &digest("a", DM, last))],
        "the digest stays written"
    );
    // The mark did not move: the session, once there, still reads both.
    let dm = map_session(&*s, session("a", DM, "sid-1", 6_000)).await;
    let rows = transcript(&*s, &dm, None, None).await;
    assert_eq!(said(&rows), ["om_1", "om_2"]);
}
both_backends!(a_digest_reset_of_a_gone_session_changes_nothing, reset_gone);

async fn marked(db: TestDb) {
    let s = open(&db).await;
    assert!(claim(&*s, DATE, DigestTrigger::Manual, 1_000).await);
    let batch = [digest("a", KEY, 10), digest("a", DM, 20)];
    let ids = s.record_digests(&batch).await.expect("record");
    s.mark_digest(
        ids[0],
        DigestStatus::ResetFailed,
        DigestReason::DatabaseError,
        Some("database is locked"),
        UnixMs(7_000),
    )
    .await
    .expect("mark");
    let failed = DigestRow {
        status: DigestStatus::ResetFailed,
        reason: DigestReason::DatabaseError,
        detail: Some("database is locked".into()),
        updated_at: UnixMs(7_000),
        ..stored(ids[0], &batch[0])
    };
    assert_eq!(
        digests_of(&*s, DATE).await,
        [failed.clone(), stored(ids[1], &batch[1])],
        "only that digest"
    );

    // Marked again: every field is set, a detail cleared.
    s.mark_digest(
        ids[0],
        DigestStatus::Kept,
        DigestReason::FileWriteFailed,
        None,
        UnixMs(8_000),
    )
    .await
    .expect("mark");
    let kept = DigestRow {
        status: DigestStatus::Kept,
        reason: DigestReason::FileWriteFailed,
        detail: None,
        updated_at: UnixMs(8_000),
        ..failed
    };
    assert_eq!(digests_of(&*s, DATE).await[0], kept);
}
both_backends!(a_digest_is_marked_with_status_reason_and_detail, marked);
