//! Media references read back from the event log (a recall takes them), and a turn's
//! attachments: recorded once per (turn, key), marked sent, gone with their turn.

use feishu_bridge::{
    store::{NewAttachment, NewContextEvent},
    util::UnixMs,
    vocab::kinds::EventType,
};

use super::{open, queue, record, route, session, turn};
use crate::{both_backends, support::TestDb};

/// A discussion record of `message_id` by `profile` whose metadata carries `media`.
fn with_media(profile: &str, message_id: &str, media: &str) -> NewContextEvent {
    NewContextEvent {
        metadata_json: format!("{{\"message_type\":\"image\",\"media\":{media}}}"),
        ..record(profile, message_id, EventType::HumanMessage)
    }
}

async fn references(db: TestDb) {
    let s = open(&db).await;
    let img = r#"[{"kind":"image","key":"img_1"}]"#;
    for (profile, id) in [("a", "om_img"), ("b", "om_img"), ("a", "om_text")] {
        let e = with_media(profile, id, img);
        s.apply_route(&route(profile, id, vec![e]))
            .await
            .expect("route");
    }
    let ids = ["om_img".to_string(), "om_text".into(), "om_none".into()];
    let mut got = s.media_metadata("a", &ids).await.expect("read");
    got.sort();
    assert_eq!(got.len(), 2, "one per message of this profile: {got:?}");
    assert!(got[0].1.contains("img_1"), "{got:?}");
    s.recall("om_img", super::CHAT, UnixMs(50))
        .await
        .expect("recall");
    let got = s.media_metadata("a", &ids).await.expect("read");
    assert_eq!(
        got.iter().map(|(m, _)| m.as_str()).collect::<Vec<_>>(),
        ["om_text"],
        "a recalled message has no references left"
    );
}
both_backends!(media_references_read_back_until_a_recall, references);

async fn attachments(db: TestDb) {
    let s = open(&db).await;
    super::map_session(&*s, session("a", super::KEY, "sid-1", 100)).await;
    queue(&*s, turn("a", super::KEY, "t1")).await;
    let new = NewAttachment {
        turn_id: "t1",
        key: "k1",
        profile: "a",
        name: "chart.png",
        kind: "image",
        size_bytes: 42,
        now: UnixMs(200),
    };
    let (row, fresh) = s.begin_attachment(&new).await.expect("begin");
    assert!(fresh);
    assert_eq!((row.message_id, row.sent_at), (None, None));
    let again = NewAttachment {
        name: "other.png",
        now: UnixMs(300),
        ..new.clone()
    };
    let (row, fresh) = s.begin_attachment(&again).await.expect("begin");
    assert!(!fresh, "the same turn and key is the same attachment");
    assert_eq!(
        (row.name.as_str(), row.created_at),
        ("chart.png", UnixMs(200))
    );
    s.attachment_sent("t1", "k1", ("img_v3_1", "om_sent"), UnixMs(250))
        .await
        .expect("sent");
    let second = NewAttachment {
        key: "k2",
        kind: "file",
        name: "a.pdf",
        now: UnixMs(260),
        ..new.clone()
    };
    s.begin_attachment(&second).await.expect("begin");
    let all = s.turn_attachments("t1").await.expect("list");
    assert_eq!(all.len(), 2);
    assert_eq!(
        (
            all[0].message_id.as_deref(),
            all[0].resource_key.as_deref(),
            all[0].sent_at
        ),
        (Some("om_sent"), Some("img_v3_1"), Some(UnixMs(250)))
    );
    assert_eq!(
        (all[1].key.as_str(), all[1].message_id.as_deref()),
        ("k2", None)
    );
    assert!(s.turn_attachments("t2").await.expect("list").is_empty());
}
both_backends!(attachments_are_recorded_once_per_turn_and_key, attachments);
