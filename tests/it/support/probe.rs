//! What some tests need around them, looked for in one way by the build and the tests.
//!
//! `build.rs` includes this file (with `pg_bin.rs`) to compile the tests whose needs are
//! missing as ignored; the tests include it to notice when the answer has changed since
//! that build (`environment.rs`). Standard library only, and quick: a build runs it.

use std::{
    net::{TcpStream, ToSocketAddrs},
    time::Duration,
};

/// The Postgres the tests use unless [`PG_URL`] names another.
pub const DEFAULT_PG_URL: &str = "postgres://postgres@127.0.0.1:5432/test";
/// The variable that points the tests at another Postgres.
pub const PG_URL: &str = "FEISHU_BRIDGE_TEST_PG_URL";
/// Set to `1` (CI): the Postgres tests and the private-cluster tests always run, so a
/// Postgres that does not answer, or missing Postgres programs, fail them.
pub const REQUIRE_PG: &str = "FEISHU_BRIDGE_TEST_REQUIRE_PG";
/// Set to `1` (CI): the `promtool` check always runs, so a missing `promtool` fails it.
pub const REQUIRE_PROMTOOL: &str = "FEISHU_BRIDGE_TEST_REQUIRE_PROMTOOL";
/// Set to `1` (CI): the browser tests of the web view always run, so a missing
/// `chromium` or `chromedriver` fails them.
pub const REQUIRE_BROWSER: &str = "FEISHU_BRIDGE_TEST_REQUIRE_BROWSER";
/// The file in the build's `OUT_DIR` that the build watches: the tests touch it when
/// what they find differs from what the build found.
pub const STAMP: &str = "test-environment.stamp";

/// Whether `var` is set to `1` or `true`.
pub fn required(var: &str) -> bool {
    std::env::var(var).is_ok_and(|v| v == "1" || v == "true")
}

/// The Postgres URL the tests use.
pub fn pg_url() -> String {
    std::env::var(PG_URL).unwrap_or_else(|_| DEFAULT_PG_URL.into())
}

/// `host:port` of a `postgres://user@host:port/db?…` URL (port 5432 by default); `None`
/// for a socket path or an odd URL, which the tests find out about for themselves.
pub fn pg_address(url: &str) -> Option<String> {
    let rest = url.split_once("://")?.1;
    let authority = rest.split(['/', '?']).next()?;
    let host_port = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    if host_port.is_empty() {
        return None;
    }
    let has_port = host_port
        .rsplit_once(':')
        .is_some_and(|(_, p)| p.bytes().all(|b| b.is_ascii_digit()) && !host_port.ends_with(']'));
    Some(if has_port {
        host_port.to_string()
    } else {
        format!("{host_port}:5432")
    })
}

/// Whether something accepts a TCP connection at `address` within a second.
pub fn answers(address: &str) -> bool {
    address
        .to_socket_addrs()
        .ok()
        .into_iter()
        .flatten()
        .any(|a| TcpStream::connect_timeout(&a, Duration::from_secs(1)).is_ok())
}

/// Whether `initdb` is where the private-cluster tests look for it.
pub fn pg_programs_found() -> bool {
    super::pg_bin::pg_bin().is_some_and(|bin| bin.join("initdb").is_file())
}

/// Whether a `promtool` is on the `PATH`.
pub fn promtool_found() -> bool {
    on_path("promtool").is_some()
}

/// Whether `chromium` and `chromedriver` are both on the `PATH`.
pub fn browser_found() -> bool {
    on_path("chromium").is_some() && on_path("chromedriver").is_some()
}

/// Where `program` is on the `PATH`.
pub fn on_path(program: &str) -> Option<std::path::PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(program))
        .find(|p| p.is_file())
}
