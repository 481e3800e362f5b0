//! Recorded replies.

use feishu_bridge::store::{NewOutbound, OutboundRow, ReplyKind};

use super::{open, reply};
use crate::{both_backends, support::TestDb};

async fn replies(db: TestDb) {
    let s = open(&db).await;
    assert!(s.outbound("a", 10).await.expect("replies").is_empty());
    let mut expected = Vec::new();
    for (i, kind) in (0_i64..).zip(ReplyKind::ALL) {
        let sent = NewOutbound {
            reply_to: (i % 2 == 0).then(|| format!("om_{i}")),
            kind: *kind,
            ..reply("a", &format!("reply {i}"), 100 + i)
        };
        let id = s.record_outbound(&sent).await.expect("record");
        let other = NewOutbound {
            profile: "b".into(),
            ..sent.clone()
        };
        s.record_outbound(&other).await.expect("record");
        expected.push(OutboundRow {
            id,
            profile: sent.profile,
            chat_id: sent.chat_id,
            reply_to: sent.reply_to,
            kind: sent.kind,
            text: sent.text,
            created_at: sent.created_at,
        });
    }
    assert!(expected.windows(2).all(|w| w[0].id < w[1].id), "ids grow");
    let all = s.outbound("a", 10).await.expect("replies");
    assert_eq!(all, expected, "every kind reads back, oldest first");
    let latest = s.outbound("a", 2).await.expect("replies");
    assert_eq!(
        latest,
        &expected[expected.len() - 2..],
        "the most recent ones"
    );
    let theirs = s.outbound("b", 10).await.expect("replies");
    assert_eq!(theirs.len(), ReplyKind::ALL.len());
    assert!(theirs.iter().all(|r| r.profile == "b"));
    assert!(s.outbound("c", 10).await.expect("replies").is_empty());
}
both_backends!(replies_read_back_per_profile_most_recent_last, replies);
