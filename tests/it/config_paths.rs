//! Where the SQLite file is, run by run of the real binary on real files: a relative path a
//! config file writes is read from the file's directory, wherever the command runs; the
//! default and `DATABASE_URL` stay in the working directory; and the commands that only
//! read (`explain`, `digest`) refuse a database that is not there instead of creating it.

use std::{path::Path, process::Output};

use crate::support::cli::bridge;

/// A profile, so `explain` has one to explain for.
const PROFILE: &str = "[[profiles]]\nname = \"planner\"\napp_id = \"cli_x\"\n\
                       verification_token = \"t\"\ndry_run = true\n";

/// Runs the binary with `args` in `cwd`; its output.
fn run_in(cwd: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = bridge(args);
    cmd.current_dir(cwd);
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().expect("the binary runs")
}

/// The output of a run that must succeed.
fn ok(out: Output) -> String {
    assert!(
        out.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// How many inbox events the migrated SQLite file at `path` holds (it has the table).
fn inbox_rows(path: &Path) -> i64 {
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    rt.block_on(async {
        let url = format!("sqlite://{}", path.display());
        let pool = sqlx::SqlitePool::connect(&url).await.expect("opens");
        let n: i64 = sqlx::query_scalar("SELECT count(*) FROM inbox_events")
            .fetch_one(&pool)
            .await
            .expect("the table exists");
        pool.close().await;
        n
    })
}

#[test]
fn a_relative_sqlite_path_in_a_config_file_is_read_from_the_file_s_directory() {
    let home = tempfile::tempdir().expect("dir");
    let elsewhere = tempfile::tempdir().expect("dir");
    let conf = home.path().join("hub");
    std::fs::create_dir(&conf).expect("mkdir");
    let file = conf.join("hub.toml");
    std::fs::write(
        &file,
        format!("[database]\nurl = \"sqlite://data/hub.db\"\n{PROFILE}"),
    )
    .expect("write");
    std::fs::create_dir(conf.join("data")).expect("mkdir");
    let config = file.display().to_string();
    let db = conf.join("data/hub.db");

    let shown = ok(run_in(
        elsewhere.path(),
        &["--config", &config, "check-config"],
        &[],
    ));
    assert!(
        shown.contains(&format!("database: sqlite://{}\n", db.display())),
        "{shown}"
    );
    ok(run_in(
        elsewhere.path(),
        &["--config", &config, "migrate"],
        &[],
    ));
    assert_eq!(inbox_rows(&db), 0, "migrated beside the config file");
    assert!(!elsewhere.path().join("data").exists());

    // A relative --config too: from its parent directory, the same file.
    let shown = ok(run_in(
        home.path(),
        &["--config", "hub/hub.toml", "check-config"],
        &[],
    ));
    assert!(
        shown.contains("database: sqlite://hub/data/hub.db\n"),
        "{shown}"
    );
    // explain reads the database migrated above, from anywhere: no decision yet, and
    // not "no such table" (an empty database of its own).
    let out = run_in(
        elsewhere.path(),
        &["--config", &config, "explain", "om_nothing"],
        &[],
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("no context decision for root om_nothing"),
        "{stderr}"
    );
    let digest = ok(run_in(
        elsewhere.path(),
        &["--config", &config, "digest"],
        &[],
    ));
    assert_eq!(digest, "no digest has run yet\n");
}

#[test]
fn the_default_database_and_database_url_stay_in_the_working_directory() {
    let cwd = tempfile::tempdir().expect("dir");
    let conf = tempfile::tempdir().expect("dir");

    // No config file at all: ./feishu-bridge.db.
    ok(run_in(cwd.path(), &["migrate"], &[]));
    assert_eq!(inbox_rows(&cwd.path().join("feishu-bridge.db")), 0);

    // A config file that does not write database.url: the default, in the working
    // directory, not beside the file.
    let bare = conf.path().join("bare.toml");
    std::fs::write(&bare, PROFILE).expect("write");
    let shown = ok(run_in(
        cwd.path(),
        &["--config", &bare.display().to_string(), "check-config"],
        &[],
    ));
    assert!(
        shown.contains("database: sqlite://feishu-bridge.db\n"),
        "{shown}"
    );

    // DATABASE_URL wins over the file, and is read from the working directory.
    let written = conf.path().join("written.toml");
    std::fs::write(
        &written,
        format!("[database]\nurl = \"sqlite://from-file.db\"\n{PROFILE}"),
    )
    .expect("write");
    ok(run_in(
        cwd.path(),
        &["--config", &written.display().to_string(), "migrate"],
        &[("DATABASE_URL", "sqlite://from-env.db")],
    ));
    assert_eq!(inbox_rows(&cwd.path().join("from-env.db")), 0);
    assert!(!conf.path().join("from-file.db").exists());
    assert!(!conf.path().join("from-env.db").exists());
}

#[test]
fn explain_and_digest_refuse_a_missing_database_and_create_none() {
    let cwd = tempfile::tempdir().expect("dir");
    let conf = tempfile::tempdir().expect("dir");
    let file = conf.path().join("hub.toml");
    std::fs::write(
        &file,
        format!("[database]\nurl = \"sqlite://missing.db\"\n{PROFILE}"),
    )
    .expect("write");
    let config = file.display().to_string();
    let missing = conf.path().join("missing.db");
    for args in [
        vec!["--config", &config, "explain", "om_demo_root", "--verbose"],
        vec!["--config", &config, "digest"],
    ] {
        let out = run_in(cwd.path(), &args, &[]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {stderr}");
        assert!(
            stderr.contains(&format!("no database at {}", missing.display()))
                && stderr.contains(&format!("check database.url in {config}")),
            "{args:?}: {stderr}"
        );
        for dir in [cwd.path(), conf.path()] {
            let left: Vec<_> = std::fs::read_dir(dir)
                .expect("read dir")
                .map(|e| e.expect("entry").file_name())
                .filter(|n| n != "hub.toml")
                .collect();
            assert!(
                left.is_empty(),
                "{args:?} left {left:?} in {}",
                dir.display()
            );
        }
    }
}
