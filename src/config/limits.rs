//! Checks of the connection limits in `[server]`: the head, body and idle time bounds
//! and the cap on open connections. Each error names its key.

use super::{ServerConfig, problems::Problems};

/// Far above any file-descriptor limit in practice; keeps the connection semaphore in range.
const MAX_CONNECTIONS_LIMIT: u32 = 1_000_000;

pub(super) fn validate(server: &ServerConfig, out: &mut Problems) {
    for (key, secs) in [
        ("server.header_timeout_secs", server.header_timeout_secs),
        ("server.body_timeout_secs", server.body_timeout_secs),
        ("server.idle_timeout_secs", server.idle_timeout_secs),
    ] {
        out.require(secs > 0, key, || "must be positive".into());
    }
    out.require(server.max_connections > 0, "server.max_connections", || {
        "must be at least 1".into()
    });
    out.require(
        server.max_connections <= MAX_CONNECTIONS_LIMIT,
        "server.max_connections",
        || format!("must be at most {MAX_CONNECTIONS_LIMIT}"),
    );
}

#[cfg(test)]
mod tests {
    use super::super::load_from_str;

    #[test]
    fn connection_limits_are_validated_naming_their_key() {
        for (line, key, message) in [
            (
                "header_timeout_secs = 0",
                "server.header_timeout_secs",
                "must be positive",
            ),
            (
                "body_timeout_secs = 0",
                "server.body_timeout_secs",
                "must be positive",
            ),
            (
                "idle_timeout_secs = 0",
                "server.idle_timeout_secs",
                "must be positive",
            ),
            (
                "max_connections = 0",
                "server.max_connections",
                "must be at least 1",
            ),
            (
                "max_connections = 1000001",
                "server.max_connections",
                "must be at most 1000000",
            ),
        ] {
            let err = load_from_str(&format!("[server]\n{line}\n"), &|_| None)
                .expect_err(line)
                .single();
            assert_eq!(
                (err.key.as_str(), err.message.as_str()),
                (key, message),
                "{line}"
            );
            assert!(err.to_string().starts_with(key), "{err}");
        }
        let text = "[server]\nheader_timeout_secs = 2\nbody_timeout_secs = 3\n\
                    idle_timeout_secs = 90\nmax_connections = 1\n";
        let server = load_from_str(text, &|_| None).expect("valid").server;
        let read = (
            server.header_timeout_secs,
            server.body_timeout_secs,
            server.idle_timeout_secs,
            server.max_connections,
        );
        assert_eq!(read, (2, 3, 90, 1));
    }

    #[test]
    fn the_defaults_outlast_a_proxy_keep_alive_and_leave_file_descriptors_spare() {
        let server = load_from_str("", &|_| None).expect("valid").server;
        // nginx keeps idle upstream connections for 60 s by default; the bridge must not
        // close one first, or the proxy may send a request into a closing connection.
        assert!(
            server.idle_timeout_secs > 60,
            "{}",
            server.idle_timeout_secs
        );
        assert!(server.header_timeout_secs < server.idle_timeout_secs);
        // Room below the usual 1024 file descriptors for the database pool and clients.
        assert!((1..1024).contains(&server.max_connections));
    }
}
