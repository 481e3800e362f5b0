//! The batched feed: items gathered with their route, packed newest first under both
//! caps, segments attached under the unread limit and read by a turn, recalls and
//! resets, the sessions a flush of a profile takes and the counts `/status` shows, on
//! both backends.

use feishu_bridge::{
    store::{FeedItemState, NewFeedItem, PackLimits, RouteWrite, SegmentState, Store},
    util::UnixMs,
};

use super::{CHAT, KEY, SCOPE, map_session, open, reset, route, session};
use crate::{both_backends, support::TestDb};

/// Gathers `message_id` for `profile`'s session [`KEY`], said and gathered at `at`, with
/// its route (the way the worker writes it).
async fn gather(s: &dyn Store, profile: &str, message_id: &str, text: &str, at: i64) {
    gather_in(s, profile, KEY, message_id, text, at).await;
}

/// [`gather`] for session `key`.
async fn gather_in(s: &dyn Store, profile: &str, key: &str, message_id: &str, text: &str, at: i64) {
    let write = RouteWrite {
        feed: Some(NewFeedItem {
            profile: profile.into(),
            session_key: key.into(),
            chat_id: CHAT.into(),
            message_id: message_id.into(),
            sender: "Alice".into(),
            text: text.into(),
            said_at: UnixMs(at),
            gathered_at: UnixMs(at),
        }),
        ..route(profile, message_id, Vec::new())
    };
    s.apply_route(&write)
        .await
        .expect("route with its feed item");
}

fn limits(max_items: usize, max_chars: usize) -> PackLimits {
    PackLimits {
        max_items,
        max_chars,
    }
}

/// The texts of a segment's items, oldest first.
async fn texts(s: &dyn Store, segment_id: i64) -> Vec<String> {
    let items = s.segment_items(segment_id).await.expect("items");
    items.into_iter().map(|i| i.text).collect()
}

async fn packed_newest_first(db: TestDb) {
    let s = open(&db).await;
    for i in 1..=6 {
        gather(&*s, "a", &format!("om_{i}"), &format!("m{i}"), i * 100).await;
    }
    // Delivered twice (a retried event): gathered once.
    gather(&*s, "a", "om_6", "m6", 600).await;
    assert_eq!(s.gathered_count("a", KEY).await.expect("count"), 6);
    assert!(
        s.gathered_count("b", KEY).await.expect("count") == 0,
        "per profile"
    );

    // Due by count, by time, or not at all.
    assert_eq!(s.feed_due("a", 6, UnixMs(0)).await.expect("due"), [KEY]);
    assert_eq!(s.feed_due("a", 7, UnixMs(100)).await.expect("due"), [KEY]);
    assert!(
        s.feed_due("a", 7, UnixMs(99))
            .await
            .expect("due")
            .is_empty()
    );

    // At most 4 items: the newest four, stored oldest first; the older ones passed over.
    let seg = s
        .pack_segment("a", KEY, limits(4, 1000), UnixMs(700))
        .await
        .expect("pack")
        .expect("a segment");
    assert_eq!((seg.items, seg.state), (4, SegmentState::Waiting));
    assert_eq!(texts(&*s, seg.id).await, ["m3", "m4", "m5", "m6"]);
    let feed = s.session_feed("a", KEY).await.expect("feed");
    assert!(feed.gathered.is_empty(), "nothing left gathered");
    assert!(
        s.pack_segment("a", KEY, limits(4, 1000), UnixMs(800))
            .await
            .expect("pack")
            .is_none()
    );

    // At most N characters (sender, separator and text each): "Alice: " + 10 = 17.
    for i in 7..=9 {
        gather(&*s, "a", &format!("om_{i}"), &"x".repeat(10), i * 100).await;
    }
    let seg = s
        .pack_segment("a", KEY, limits(40, 40), UnixMs(1000))
        .await
        .expect("pack")
        .expect("a segment");
    assert_eq!(seg.items, 2, "two of 17 fit in 40");
    assert!(seg.chars <= 40);
    let counts = s.feed_counts().await.expect("counts");
    assert_eq!(counts.len(), 1);
    assert_eq!((counts[0].gathered, counts[0].waiting), (0, 2));
}
both_backends!(
    a_segment_takes_the_newest_items_under_both_caps,
    packed_newest_first
);

async fn gate_and_read(db: TestDb) {
    let s = open(&db).await;
    for seg in 0..4 {
        gather(&*s, "a", &format!("om_g{seg}"), "hi", 100 + seg).await;
        s.pack_segment("a", KEY, limits(40, 1200), UnixMs(200))
            .await
            .expect("pack");
    }
    // Three fit under the limit; the fourth waits.
    let room = s.attachable("a", KEY, 3).await.expect("attachable");
    assert_eq!(room.len(), 3);
    for seg in &room {
        assert!(
            s.mark_attached(seg.id, "sid-1", UnixMs(300))
                .await
                .expect("attach")
        );
        assert!(
            !s.mark_attached(seg.id, "sid-1", UnixMs(300))
                .await
                .expect("attach"),
            "once"
        );
    }
    assert!(
        s.attachable("a", KEY, 3)
            .await
            .expect("attachable")
            .is_empty(),
        "the gate holds"
    );
    let attached = s.attached("a", KEY).await.expect("attached");
    assert_eq!(attached.len(), 3);
    assert_eq!(attached[0].session_id.as_deref(), Some("sid-1"));

    // A turn reads two: room for the waiting one.
    let ids: Vec<i64> = attached.iter().take(2).map(|s| s.id).collect();
    s.mark_read(&ids, "turn_1", UnixMs(400))
        .await
        .expect("read");
    let read = s.read_by("turn_1").await.expect("read by");
    assert_eq!(read.iter().map(|s| s.id).collect::<Vec<_>>(), ids);
    assert!(read.iter().all(|s| s.state == SegmentState::Read));
    let room = s.attachable("a", KEY, 3).await.expect("attachable");
    assert_eq!(room.len(), 1, "the waiting one now fits");
}
both_backends!(
    at_most_three_unread_segments_and_a_read_makes_room,
    gate_and_read
);

async fn recall_and_reset(db: TestDb) {
    let s = open(&db).await;
    map_session(&*s, session("a", KEY, "sid-1", 50)).await;
    gather(&*s, "a", "om_1", "first", 100).await;
    gather(&*s, "a", "om_2", "second", 200).await;
    let seg = s
        .pack_segment("a", KEY, limits(40, 1200), UnixMs(300))
        .await
        .expect("pack")
        .expect("segment");
    // A message recalled after packing drops out of its segment, text and all.
    s.recall("om_1", CHAT, UnixMs(400)).await.expect("recall");
    assert_eq!(texts(&*s, seg.id).await, ["second"]);
    // A message recalled while gathered is never packed.
    gather(&*s, "a", "om_3", "third", 500).await;
    s.recall("om_3", CHAT, UnixMs(600)).await.expect("recall");
    assert_eq!(s.gathered_count("a", KEY).await.expect("count"), 0);

    // /new clears what was gathered and what was not read yet; read segments stay read.
    gather(&*s, "a", "om_4", "fourth", 700).await;
    assert!(
        s.mark_attached(seg.id, "sid-1", UnixMs(800))
            .await
            .expect("attach")
    );
    s.reset_session(&reset("a", KEY, SCOPE, "sid-2", UnixMs(900)))
        .await
        .expect("reset")
        .expect("the session");
    let feed = s.session_feed("a", KEY).await.expect("feed");
    assert!(feed.gathered.is_empty());
    assert_eq!(feed.segments.len(), 1);
    assert_eq!(feed.segments[0].state, SegmentState::Cleared);
    assert!(s.attached("a", KEY).await.expect("attached").is_empty());
    let all = s.segment_items(seg.id).await.expect("items");
    assert!(all.iter().all(|i| i.state == FeedItemState::Packed));
}
both_backends!(
    recalls_leave_the_feed_and_a_reset_clears_the_unread,
    recall_and_reset
);

async fn retention(db: TestDb) {
    let s = open(&db).await;
    // An old segment (packed at 150) and an old item still gathered; newer ones of each.
    gather(&*s, "a", "om_old", "old talk", 100).await;
    let old = s
        .pack_segment("a", KEY, limits(10, 1000), UnixMs(150))
        .await
        .expect("pack")
        .expect("a segment");
    gather(&*s, "a", "om_old2", "old, never packed", 200).await;
    gather(&*s, "b", "om_new", "new talk", 5_000).await;
    let new = s
        .pack_segment("b", KEY, limits(10, 1000), UnixMs(5_100))
        .await
        .expect("pack")
        .expect("a segment");
    gather(&*s, "a", "om_new2", "new, gathered", 6_000).await;

    s.purge(UnixMs(5_000)).await.expect("purge");
    assert_eq!(db.count("feed_segments").await, 1, "the old segment went");
    assert_eq!(
        db.count("feed_items").await,
        2,
        "its item and the old one too"
    );
    assert!(s.segment_items(old.id).await.expect("items").is_empty());
    assert_eq!(texts(&*s, new.id).await, ["new talk"]);
    let a = s.session_feed("a", KEY).await.expect("feed");
    let gathered: Vec<_> = a.gathered.iter().map(|i| i.text.as_str()).collect();
    assert_eq!(gathered, ["new, gathered"]);
    assert!(a.segments.is_empty());
    assert_eq!(
        s.session_feed("b", KEY).await.expect("feed").segments,
        [new]
    );
}
both_backends!(
    retention_purges_feed_items_and_segments_older_than_the_cutoff,
    retention
);

async fn sessions_and_counts(db: TestDb) {
    const OTHER: &str = "group:oc_other";
    let s = open(&db).await;
    assert!(s.feed_sessions("a").await.expect("sessions").is_empty());
    assert!(s.feed_counts().await.expect("counts").is_empty());
    gather(&*s, "a", "om_1", "one", 100).await;
    gather_in(&*s, "a", OTHER, "om_2", "two", 200).await;
    gather_in(&*s, "b", OTHER, "om_3", "three", 300).await;
    let mut both = vec![KEY.to_string(), OTHER.to_string()];
    both.sort();
    assert_eq!(s.feed_sessions("a").await.expect("sessions"), both);
    assert_eq!(s.feed_sessions("b").await.expect("sessions"), [OTHER]);

    // Packed, the session is still listed (its segment waits), once; attached, it is not.
    let first = s
        .pack_segment("a", KEY, limits(40, 1200), UnixMs(400))
        .await
        .expect("pack")
        .expect("a segment");
    gather(&*s, "a", "om_4", "four", 450).await;
    assert_eq!(s.feed_sessions("a").await.expect("sessions"), both);
    let counts = s.feed_counts().await.expect("counts");
    let of = |p: &str| counts.iter().find(|c| c.profile == p).cloned();
    let a = of("a").expect("a's counts");
    assert_eq!((a.gathered, a.waiting, a.attached), (2, 1, 0));
    let next = s
        .pack_segment("a", KEY, limits(40, 1200), UnixMs(460))
        .await
        .expect("pack")
        .expect("a segment");
    for id in [first.id, next.id] {
        s.mark_attached(id, "sid-1", UnixMs(500))
            .await
            .expect("attach");
    }
    assert_eq!(s.feed_sessions("a").await.expect("sessions"), [OTHER]);
    let counts = s.feed_counts().await.expect("counts");
    let of = |p: &str| counts.iter().find(|c| c.profile == p).cloned();
    let a = of("a").expect("a's counts");
    assert_eq!((a.gathered, a.waiting, a.attached), (1, 0, 2));
    let b = of("b").expect("b's counts");
    assert_eq!((b.gathered, b.waiting, b.attached), (1, 0, 0));
}
both_backends!(
    a_profile_s_feed_sessions_are_those_gathering_or_waiting_and_counted_per_profile,
    sessions_and_counts
);
