//! `server.listen`: an IP address or a host name, and a port. A host name is resolved
//! once, at load time, so the address the listener binds and the address the
//! admin-token check looks at are the same one.

use std::net::{SocketAddr, ToSocketAddrs};

use super::ConfigError;

const EXPECTED: &str = "expected an IP address or host name and a port, e.g. 127.0.0.1:8080";

/// The address `listen` names: an `ip:port` as it is, else `host:port` resolved.
pub(super) fn resolve(listen: &str) -> Result<SocketAddr, ConfigError> {
    if let Ok(addr) = listen.parse::<SocketAddr>() {
        return Ok(addr);
    }
    let malformed = || ConfigError::new("server.listen", format!("{EXPECTED}; got {listen:?}"));
    let (host, port) = listen.rsplit_once(':').ok_or_else(malformed)?;
    let port: u16 = port.parse().map_err(|_| malformed())?;
    if host.is_empty() || host.contains(char::is_whitespace) {
        return Err(malformed());
    }
    let found: Vec<SocketAddr> = (host, port)
        .to_socket_addrs()
        .map(Iterator::collect)
        .unwrap_or_default();
    pick(host, &found).ok_or_else(|| {
        ConfigError::new(
            "server.listen",
            format!("cannot resolve host {host:?}; {EXPECTED}"),
        )
    })
}

/// The first address, except that `localhost` takes its IPv4 loopback address when it
/// has one: resolvers list `::1` first on many systems, and a client that tries
/// `127.0.0.1` (curl, Prometheus, the `healthcheck` command) should find the listener.
fn pick(host: &str, found: &[SocketAddr]) -> Option<SocketAddr> {
    let v4_loopback = || found.iter().find(|a| a.is_ipv4() && a.ip().is_loopback());
    let preferred = if host.eq_ignore_ascii_case("localhost") {
        v4_loopback()
    } else {
        None
    };
    preferred.or_else(|| found.first()).copied()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addr(s: &str) -> SocketAddr {
        s.parse().expect("an address")
    }

    #[test]
    fn localhost_prefers_ipv4_loopback_and_other_hosts_take_the_first_address() {
        let both = [addr("[::1]:80"), addr("127.0.0.1:80")];
        assert_eq!(pick("localhost", &both), Some(addr("127.0.0.1:80")));
        assert_eq!(pick("LocalHost", &both), Some(addr("127.0.0.1:80")));
        assert_eq!(pick("example.test", &both), Some(addr("[::1]:80")));
        assert_eq!(pick("localhost", &both[..1]), Some(addr("[::1]:80")));
        assert_eq!(pick("localhost", &[]), None);
    }

    #[test]
    fn addresses_pass_through_and_host_names_resolve() {
        assert_eq!(resolve("0.0.0.0:9").ok(), Some(addr("0.0.0.0:9")));
        assert_eq!(resolve("[::1]:9").ok(), Some(addr("[::1]:9")));
        let local = resolve("localhost:0").expect("localhost resolves");
        assert!(local.ip().is_loopback(), "{local}");
        assert_eq!(local.port(), 0);
    }

    #[test]
    fn a_malformed_or_unknown_listen_says_what_is_expected() {
        for bad in [
            "localhost",
            "localhost:http",
            ":8080",
            "a b:80",
            "127.0.0.1:70000",
        ] {
            let err = resolve(bad).expect_err(bad);
            assert_eq!(err.key, "server.listen");
            assert!(err.message.contains("e.g. 127.0.0.1:8080"), "{err}");
            assert!(err.message.contains(&format!("{bad:?}")), "{err}");
        }
        let err = resolve("no-such-host.invalid:8080").expect_err("unresolvable");
        assert_eq!(
            err.message,
            "cannot resolve host \"no-such-host.invalid\"; expected an IP address or host \
             name and a port, e.g. 127.0.0.1:8080"
        );
    }
}
