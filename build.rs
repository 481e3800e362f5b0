//! Build-time probe for the test suite: a test that needs what this machine may lack (a
//! Postgres that answers, Postgres's own programs for a private cluster, `promtool`, a
//! headless Chromium with its chromedriver) is
//! compiled as ignored when it is missing, so `cargo test` counts it as ignored instead
//! of passing it unseen. It changes nothing in the service itself.
//!
//! Cargo reruns this script only when an input it was told about changes, and a rerun
//! rebuilds every target of the crate, so the probe cannot simply run on every build.
//! Instead the tests look again when they run (`tests/it/support/environment.rs`): when
//! what they find differs from what this script found, they touch the stamp file it
//! watches, and the next `cargo test` probes again and rebuilds with the new answer.

use std::{
    fs::File,
    path::Path,
    time::{Duration, UNIX_EPOCH},
};

#[path = "tests/faults/support/pg_bin.rs"]
mod pg_bin;
#[path = "tests/it/support/probe.rs"]
mod probe;

fn main() {
    for cfg in [
        "pg_unreachable",
        "pg_bin_missing",
        "promtool_missing",
        "browser_missing",
    ] {
        println!("cargo::rustc-check-cfg=cfg({cfg})");
    }
    println!("cargo::rerun-if-changed=build.rs");
    // The migrations are embedded by `sqlx::migrate!`, which stable Rust cannot tell
    // Cargo about: a new or changed migration must rebuild the crate.
    println!("cargo::rerun-if-changed=migrations");
    for var in [
        probe::PG_URL,
        probe::REQUIRE_PG,
        probe::REQUIRE_PROMTOOL,
        probe::REQUIRE_BROWSER,
        "PG_BIN",
    ] {
        println!("cargo::rerun-if-env-changed={var}");
    }
    watch_stamp();

    if !probe::required(probe::REQUIRE_PROMTOOL) && !probe::promtool_found() {
        println!("cargo::rustc-cfg=promtool_missing");
        println!(
            "cargo::warning=No promtool on the PATH: the check of /metrics with \
             `promtool check metrics` is compiled as ignored until one is installed (Debian \
             package prometheus). See README.md on the tests."
        );
    }
    if !probe::required(probe::REQUIRE_BROWSER) && !probe::browser_found() {
        println!("cargo::rustc-cfg=browser_missing");
        println!(
            "cargo::warning=No chromium and chromedriver on the PATH: the web view's browser \
             tests are compiled as ignored until they are installed (Debian packages chromium \
             and chromium-driver). See README.md on the tests."
        );
    }
    if probe::required(probe::REQUIRE_PG) {
        return;
    }
    if !probe::pg_programs_found() {
        println!("cargo::rustc-cfg=pg_bin_missing");
        println!(
            "cargo::warning=No Postgres programs (initdb under /usr/lib/postgresql/*/bin or \
             $PG_BIN): the tests that start a cluster of their own are compiled as ignored \
             until they are installed. See README.md on the tests."
        );
    }
    let Some(address) = probe::pg_address(&probe::pg_url()) else {
        return;
    };
    if !probe::answers(&address) {
        println!("cargo::rustc-cfg=pg_unreachable");
        println!(
            "cargo::warning=Postgres is unreachable at {address}: the Postgres tests are \
             compiled as ignored until it answers. See README.md on the tests."
        );
    }
}

/// Watches the stamp the tests touch, creating it first if need be. A new stamp is
/// dated in the past: one newer than this run would have cargo run the script again.
fn watch_stamp() {
    let Some(out_dir) = std::env::var_os("OUT_DIR") else {
        return;
    };
    let stamp = Path::new(&out_dir).join(probe::STAMP);
    if !stamp.exists() {
        let past = UNIX_EPOCH + Duration::from_secs(86_400);
        if let Ok(file) = File::create(&stamp) {
            file.set_modified(past).ok();
        }
    }
    // A path that does not exist would rerun the script on every build: only a real one.
    if stamp.exists() {
        println!("cargo::rerun-if-changed={}", stamp.display());
    }
}
