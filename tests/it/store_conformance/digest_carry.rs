//! A digest carried into its session's next round and posted: the digest that reset a
//! session into its current id, with the first turn of that id that succeeded; the
//! digests waiting to be posted, and each post attempt counted and marked.

use feishu_bridge::{
    store::{
        DigestPostMark, DigestPostStatus, DigestReason, DigestReset, DigestStatus, DigestTrigger,
        NewDigest, NewDigestRun, Store,
    },
    util::UnixMs,
};

use super::{KEY, SCOPE, completion, map_session, open, queue, reset, session, start, turn};
use crate::{both_backends, support::TestDb};

const DATE: &str = "2026-12-02";

/// Claims [`DATE`].
async fn claim(s: &dyn Store) {
    let run = NewDigestRun {
        date: DATE.into(),
        trigger: DigestTrigger::Manual,
        timezone: "UTC".into(),
        started_at: UnixMs(1_000),
    };
    assert!(s.claim_digest_run(&run).await.expect("claim"));
}

/// A written digest of `profile`'s session [`KEY`] (id `sid-1`), summarized unless
/// `summary` is `None`, stored at 2 000.
fn digest(profile: &str, summary: Option<&str>) -> NewDigest {
    NewDigest {
        date: DATE.into(),
        profile: profile.into(),
        session_key: KEY.into(),
        session_id: "sid-1".into(),
        chat_id: "oc_1".into(),
        chars: 120,
        messages: 4,
        last_event_id: 0,
        summary: summary.map(Into::into),
        status: DigestStatus::Written,
        reason: DigestReason::Summarized,
        detail: None,
        now: UnixMs(2_000),
    }
}

/// Resets `profile`'s session [`KEY`] after digest `id`, to `new_id`.
async fn digest_reset(s: &dyn Store, profile: &str, id: i64, new_id: &str) {
    let r = DigestReset {
        digest_id: id,
        reset: reset(profile, KEY, SCOPE, new_id, UnixMs(3_000)),
        last_event_id: 0,
    };
    assert!(s.digest_reset(&r).await.expect("reset"));
}

async fn carried(db: TestDb) {
    let s = open(&db).await;
    claim(&*s).await;
    map_session(&*s, session("a", KEY, "sid-1", 100)).await;
    map_session(&*s, session("b", KEY, "sid-1", 100)).await;
    let ids = s
        .record_digests(&[digest("a", Some("they agreed")), digest("b", None)])
        .await
        .expect("record");
    assert_eq!(
        s.carried_digest("a", KEY).await.expect("read"),
        None,
        "not reset yet"
    );
    digest_reset(&*s, "a", ids[0], "sid-2").await;
    digest_reset(&*s, "b", ids[1], "sid-2").await;

    let found = s
        .carried_digest("a", KEY)
        .await
        .expect("read")
        .expect("carried");
    assert_eq!(
        (
            found.id,
            found.date.as_str(),
            found.summary.as_str(),
            found.first_turn
        ),
        (ids[0], DATE, "they agreed", None)
    );
    assert_eq!(
        s.carried_digest("b", KEY).await.expect("read"),
        None,
        "no summary"
    );
    assert_eq!(
        s.carried_digest("a", "group:other").await.expect("read"),
        None
    );

    // A turn of the new session that runs has not had it yet; once it succeeded it has.
    queue(&*s, turn("a", KEY, "turn_1")).await;
    start(&*s, "turn_1", "sid-2").await.expect("started");
    let running = s
        .carried_digest("a", KEY)
        .await
        .expect("read")
        .expect("carried");
    assert_eq!(running.first_turn, None);
    s.complete_turn(&completion("a", "turn_1", None))
        .await
        .expect("completed");
    queue(&*s, turn("a", KEY, "turn_2")).await;
    start(&*s, "turn_2", "sid-2").await.expect("started");
    s.complete_turn(&completion("a", "turn_2", None))
        .await
        .expect("completed");
    let answered = s
        .carried_digest("a", KEY)
        .await
        .expect("read")
        .expect("carried");
    assert_eq!(
        answered.first_turn.as_deref(),
        Some("turn_1"),
        "the first that succeeded"
    );

    // Reset again (`/new`): the digest is not this session's any more.
    s.reset_session(&reset("a", KEY, SCOPE, "sid-3", UnixMs(4_000)))
        .await
        .expect("reset")
        .expect("the session");
    assert_eq!(s.carried_digest("a", KEY).await.expect("read"), None);
}
both_backends!(
    the_digest_that_reset_a_session_is_carried_until_a_turn_succeeds,
    carried
);

/// A post attempt at digest `id`, at 5 000.
fn mark(id: i64, status: DigestPostStatus, message_id: Option<&str>) -> DigestPostMark<'_> {
    DigestPostMark {
        id,
        status,
        message_id,
        detail: (status != DigestPostStatus::Posted).then_some("why"),
        now: UnixMs(5_000),
    }
}

async fn to_post(s: &dyn Store, since: i64) -> Vec<i64> {
    let rows = s.digests_to_post(UnixMs(since), 3).await.expect("read");
    rows.into_iter().map(|r| r.id).collect()
}

async fn posts(db: TestDb) {
    let s = open(&db).await;
    claim(&*s).await;
    let mut kept = digest("c", Some("kept"));
    kept.status = DigestStatus::Kept;
    let ids = s
        .record_digests(&[
            digest("a", Some("one")),
            digest("b", None),
            kept,
            digest("d", Some("two")),
        ])
        .await
        .expect("record");
    let (a, d) = (ids[0], ids[3]);
    assert_eq!(
        to_post(&*s, 0).await,
        [a, d],
        "written with a summary, oldest first"
    );
    assert_eq!(
        to_post(&*s, 2_001).await,
        Vec::<i64>::new(),
        "older than `since`"
    );

    // Failed attempts are retried up to the most; a posted one never again.
    for _ in 0..2 {
        s.mark_digest_post(&mark(a, DigestPostStatus::Failed, None))
            .await
            .expect("mark");
    }
    s.mark_digest_post(&mark(d, DigestPostStatus::Posted, Some("om_1")))
        .await
        .expect("mark");
    assert_eq!(to_post(&*s, 0).await, [a]);
    s.mark_digest_post(&mark(a, DigestPostStatus::Failed, None))
        .await
        .expect("mark");
    assert_eq!(
        to_post(&*s, 0).await,
        Vec::<i64>::new(),
        "three failures: given up"
    );

    let rows = s.digest_posts(DATE).await.expect("read");
    let row = |id: i64| rows.iter().find(|r| r.id == id).expect("the row");
    assert_eq!(
        (
            row(a).post_status.0,
            row(a).post_attempts,
            row(a).post_detail.as_deref()
        ),
        (Some(DigestPostStatus::Failed), 3, Some("why"))
    );
    assert_eq!(
        (
            row(d).post_status.0,
            row(d).post_attempts,
            row(d).post_message_id.as_deref()
        ),
        (Some(DigestPostStatus::Posted), 1, Some("om_1"))
    );
    assert_eq!(
        (row(ids[1]).post_status.0, row(ids[1]).post_attempts),
        (None, 0)
    );

    // A skipped one is not tried again either; a later mark keeps the message id.
    let mut fresh = digest("e", Some("three"));
    fresh.session_key = "group:e".into();
    let e = s.record_digests(&[fresh]).await.expect("record")[0];
    s.mark_digest_post(&mark(e, DigestPostStatus::Skipped, None))
        .await
        .expect("mark");
    assert_eq!(to_post(&*s, 0).await, Vec::<i64>::new());
    s.mark_digest_post(&mark(d, DigestPostStatus::Posted, None))
        .await
        .expect("mark");
    let rows = s.digest_posts(DATE).await.expect("read");
    let d_row = rows.iter().find(|r| r.id == d).expect("the row");
    assert_eq!(d_row.post_message_id.as_deref(), Some("om_1"));
}
both_backends!(digests_waiting_to_be_posted_and_their_marks, posts);
