//! The database as a whole: its backend, migrations, ping and write probe.

use feishu_bridge::{
    store::{Backend, InboxCounts, NewOutbound, ReplyKind},
    util::UnixMs,
};

use super::{ev, open, open_unmigrated, reply};
use crate::{
    both_backends,
    support::{Kind, TestDb},
};

/// How many migrations the backend of `db` ships.
fn shipped(db: &TestDb) -> i64 {
    let dir = match db.kind {
        Kind::Sqlite => "sqlite",
        Kind::Postgres => "postgres",
    };
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("migrations")
        .join(dir);
    let files = std::fs::read_dir(path).expect("the migrations");
    let sql = files
        .filter_map(Result::ok)
        .filter(|f| f.path().extension().is_some_and(|e| e == "sql"))
        .count();
    i64::try_from(sql).expect("a few migrations")
}

const APPLIED: &str = "SELECT COUNT(*) FROM _sqlx_migrations WHERE success";

async fn backend_and_ping(db: TestDb) {
    let s = open_unmigrated(&db).await;
    let expected = match db.kind {
        Kind::Sqlite => (Backend::Sqlite, "sqlite"),
        Kind::Postgres => (Backend::Postgres, "postgres"),
    };
    assert_eq!((s.backend(), s.backend().as_str()), expected);
    s.ping().await.expect("a ping needs no schema");
}
both_backends!(
    backend_names_the_database_and_ping_needs_no_schema,
    backend_and_ping
);

async fn migrations(db: TestDb) {
    let s = open_unmigrated(&db).await;
    assert!(
        s.inbox_counts().await.is_err(),
        "no schema before migrating"
    );
    assert!(
        s.probe_write(UnixMs(1_000)).await.is_err(),
        "not ready either"
    );
    s.migrate().await.expect("migrate");
    let counts = s.inbox_counts().await.expect("counts");
    assert_eq!(counts, InboxCounts::default());
    assert!(shipped(&db) > 0);
    assert_eq!(
        db.scalar(APPLIED).await,
        shipped(&db),
        "every migration, once"
    );
    s.insert_inbox_batch(&[ev("a", "e1", None)])
        .await
        .expect("insert");

    // Another process (a restart, a second replica) migrates the same database.
    let again = open_unmigrated(&db).await;
    again.migrate().await.expect("migrate again");
    assert_eq!(db.scalar(APPLIED).await, shipped(&db), "nothing reapplied");
    let kept = again.inbox_event("a", "e1").await.expect("read");
    assert!(kept.is_some(), "the data stays");
}
both_backends!(
    migrate_applies_every_migration_once_and_keeps_the_data,
    migrations
);

async fn probe(db: TestDb) {
    let s = open(&db).await;
    s.probe_write(UnixMs(4_000)).await.expect("probe");
    assert_eq!(
        db.count("write_probe").await,
        1,
        "the room check is given back"
    );
    let mark = "SELECT probed_at FROM write_probe WHERE id = 1 AND pad = ''";
    assert_eq!(db.scalar(mark).await, 4_000);
    for now in 5_000..5_005 {
        s.probe_write(UnixMs(now)).await.expect("probe");
    }
    assert_eq!(db.count("write_probe").await, 1);
    assert_eq!(db.scalar(mark).await, 5_004, "each probe commits its time");

    // The probes leave no connection inside a transaction: later writes land.
    for i in 0..5 {
        let notice = NewOutbound {
            kind: ReplyKind::Notice,
            ..reply("a", &format!("after probe {i}"), 6_000)
        };
        s.record_outbound(&notice).await.expect("record");
    }
    assert_eq!(db.count("outbound_messages").await, 5);
}
both_backends!(
    probe_write_commits_one_small_row_and_leaves_the_pool_clean,
    probe
);
