//! Cached names: read back per profile and kind (ids never looked up left out), a
//! lookup without a name kept as such, a later lookup replacing an earlier one, and the
//! named ones counted per profile.

use feishu_bridge::{
    store::{CachedName, NameKind},
    util::UnixMs,
};

use super::open;
use crate::{both_backends, support::TestDb};

fn row(profile: &str, kind: NameKind, id: &str, name: Option<&str>, at: i64) -> CachedName {
    CachedName {
        profile: profile.into(),
        kind,
        id: id.into(),
        name: name.map(String::from),
        fetched_at: UnixMs(at),
    }
}

async fn cache(db: TestDb) {
    let s = open(&db).await;
    s.put_names(&[
        row("planner", NameKind::User, "ou_a", Some("Alice"), 1_000),
        row("planner", NameKind::User, "ou_b", None, 1_000),
        row("planner", NameKind::Chat, "ou_a", Some("not a user"), 1_000),
        row(
            "coder",
            NameKind::User,
            "ou_a",
            Some("Alice (coder's app)"),
            1_000,
        ),
    ])
    .await
    .expect("put");
    let ids: Vec<String> = ["ou_a", "ou_b", "ou_never"].map(String::from).to_vec();
    let mut got = s
        .cached_names("planner", NameKind::User, &ids)
        .await
        .expect("read");
    got.sort_by(|a, b| a.id.cmp(&b.id));
    assert_eq!(
        got,
        [
            row("planner", NameKind::User, "ou_a", Some("Alice"), 1_000),
            row("planner", NameKind::User, "ou_b", None, 1_000),
        ]
    );
    s.put_names(&[row("planner", NameKind::User, "ou_b", Some("Bob"), 2_000)])
        .await
        .expect("replace");
    let got = s
        .cached_names("planner", NameKind::User, &ids[1..2])
        .await
        .expect("read");
    assert_eq!(
        got,
        [row("planner", NameKind::User, "ou_b", Some("Bob"), 2_000)]
    );
    assert_eq!(
        s.names_counts().await.expect("counts"),
        [("coder".to_string(), 1), ("planner".to_string(), 3)]
    );
    let many: Vec<String> = (0..450).map(|i| format!("ou_{i}")).collect();
    let none = s.cached_names("planner", NameKind::User, &many).await;
    assert_eq!(none.expect("read in chunks"), []);
}
both_backends!(names_are_cached_per_profile_and_kind, cache);
