//! The tests the build compiled as ignored, against what is around when they run.
//!
//! `build.rs` compiles a test as ignored when what it needs was missing (a Postgres that
//! answers, Postgres's programs, `promtool`), and cargo does not run that probe again by
//! itself. So the tests look again, once per run: when the answer has changed they
//! touch the stamp the build watches, and the next `cargo test` probes again and
//! rebuilds. Notices go straight to stderr, past the test harness's capture, so they
//! show even when every test passes.

use std::{io::Write, path::Path, sync::OnceLock, time::SystemTime};

use super::probe;

/// One need of some tests: whether the build found it missing, and whether it is now.
struct Need {
    what: String,
    ignored_by_build: bool,
    missing_now: bool,
}

/// Compares what the build found with what is here now, once per test process:
/// prints what is ignored and why, and marks the build stale when the answer changed.
pub fn check() {
    static CHECKED: OnceLock<()> = OnceLock::new();
    CHECKED.get_or_init(|| {
        let changed: Vec<String> = needs()
            .into_iter()
            .filter_map(|need| notice(&need))
            .collect();
        if !changed.is_empty() {
            mark_stale(&changed);
        }
    });
}

/// Whether the build found Postgres answering and it no longer does (and CI does not
/// require it): the build is then marked stale, and a Postgres test that could not
/// connect says so in its failure.
pub fn pg_gone_since_build() -> bool {
    check();
    !cfg!(pg_unreachable)
        && !probe::required(probe::REQUIRE_PG)
        && probe::pg_address(&probe::pg_url()).is_some_and(|a| !probe::answers(&a))
}

fn needs() -> Vec<Need> {
    let mut needs = vec![
        Need {
            what: "promtool (for `promtool check metrics`)".into(),
            ignored_by_build: cfg!(promtool_missing),
            missing_now: !probe::required(probe::REQUIRE_PROMTOOL) && !probe::promtool_found(),
        },
        Need {
            what: "chromium and chromedriver (for the web view's browser tests)".into(),
            ignored_by_build: cfg!(browser_missing),
            missing_now: !probe::required(probe::REQUIRE_BROWSER) && !probe::browser_found(),
        },
    ];
    if probe::required(probe::REQUIRE_PG) {
        return needs;
    }
    needs.push(Need {
        what: "initdb (Postgres's programs, for the private-cluster tests)".into(),
        ignored_by_build: cfg!(pg_bin_missing),
        missing_now: !probe::pg_programs_found(),
    });
    if let Some(address) = probe::pg_address(&probe::pg_url()) {
        needs.push(Need {
            missing_now: !probe::answers(&address),
            what: format!("Postgres at {address}"),
            ignored_by_build: cfg!(pg_unreachable),
        });
    }
    needs
}

/// Prints the notice for `need`; `Some` when its answer changed since the build.
fn notice(need: &Need) -> Option<String> {
    let what = &need.what;
    match (need.ignored_by_build, need.missing_now) {
        (false, false) => None,
        (true, true) => {
            say(&format!(
                "NOTICE: {what} is missing: the tests that need it are ignored in this run"
            ));
            None
        }
        (true, false) => {
            say(&format!(
                "NOTICE: {what} is here now, but the tests were built without it: they are \
                 ignored in this run, and the next `cargo test` rebuilds and runs them"
            ));
            Some(format!("{what} appeared"))
        }
        (false, true) => {
            say(&format!(
                "NOTICE: {what} has gone since the tests were built: the tests that need it \
                 fail in this run, and the next `cargo test` rebuilds them as ignored"
            ));
            Some(format!("{what} went away"))
        }
    }
}

/// Touches the stamp `build.rs` watches.
fn mark_stale(why: &[String]) {
    let stamp = Path::new(env!("OUT_DIR")).join(probe::STAMP);
    let touched = std::fs::File::options()
        .write(true)
        .create(true)
        .truncate(false)
        .open(&stamp)
        .and_then(|f| f.set_modified(SystemTime::now()));
    if let Err(e) = touched {
        say(&format!(
            "NOTICE: {}; could not mark the build stale ({e}): `touch build.rs` to rebuild",
            why.join(", ")
        ));
    }
}

fn say(line: &str) {
    // Straight to the stream: `eprintln!` inside a test is captured and lost if it passes.
    let _ = writeln!(std::io::stderr(), "{line}");
}
