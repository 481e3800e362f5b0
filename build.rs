//! Build-time probe for the test suite: when the Postgres the tests use cannot be reached
//! (and CI does not require it), the Postgres variants of the tests are compiled as
//! ignored, so `cargo test` counts them as ignored instead of passing them unseen. The
//! same goes for the tests that start a private Postgres cluster of their own when no
//! Postgres binaries (`initdb`) are installed. It changes nothing in the service itself.

use std::{
    net::{TcpStream, ToSocketAddrs},
    time::Duration,
};

const DEFAULT_PG_URL: &str = "postgres://postgres@127.0.0.1:5432/test";

fn main() {
    println!("cargo::rustc-check-cfg=cfg(pg_unreachable)");
    println!("cargo::rustc-check-cfg=cfg(pg_bin_missing)");
    println!("cargo::rerun-if-changed=build.rs");
    println!("cargo::rerun-if-env-changed=FEISHU_BRIDGE_TEST_PG_URL");
    println!("cargo::rerun-if-env-changed=FEISHU_BRIDGE_TEST_REQUIRE_PG");
    println!("cargo::rerun-if-env-changed=PG_BIN");
    let required =
        std::env::var("FEISHU_BRIDGE_TEST_REQUIRE_PG").is_ok_and(|v| v == "1" || v == "true");
    if required {
        return;
    }
    if !pg_bin_found() {
        println!("cargo::rustc-cfg=pg_bin_missing");
        println!(
            "cargo::warning=No Postgres binaries (initdb under /usr/lib/postgresql/*/bin or $PG_BIN): \
             the tests that start their own cluster are compiled as ignored. Install them, then \
             `touch build.rs` to run them."
        );
    }
    let url = std::env::var("FEISHU_BRIDGE_TEST_PG_URL").unwrap_or_else(|_| DEFAULT_PG_URL.into());
    let Some(addr) = host_port(&url) else {
        // A socket path or an odd URL: the tests find out for themselves.
        return;
    };
    let reachable = addr
        .to_socket_addrs()
        .ok()
        .into_iter()
        .flatten()
        .any(|a| TcpStream::connect_timeout(&a, Duration::from_secs(1)).is_ok());
    if !reachable {
        println!("cargo::rustc-cfg=pg_unreachable");
        println!(
            "cargo::warning=Postgres is unreachable at {addr}: the Postgres tests are compiled as ignored. \
             Start it (README: Tests), then `touch build.rs` to run them."
        );
    }
}

/// `host:port` of a `postgres://user@host:port/db?…` URL (port 5432 by default).
fn host_port(url: &str) -> Option<String> {
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

/// Whether `initdb` is where the tests look for it: `$PG_BIN`, else any
/// `/usr/lib/postgresql/<version>/bin`.
fn pg_bin_found() -> bool {
    if let Some(dir) = std::env::var_os("PG_BIN") {
        return std::path::Path::new(&dir).join("initdb").exists();
    }
    std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .any(|e| e.path().join("bin").join("initdb").exists())
}
