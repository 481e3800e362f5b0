//! Without an admin token the REST routes are open to anyone who reaches the port. The
//! config allows that only on a loopback address or with `allow_unauthenticated = true`;
//! and a configured token is required whatever `allow_unauthenticated` says.

use crate::support::{ADMIN, TestApp, TestDb, config_toml, feishu::Msg};

/// The test config listening on `listen`, with `server` in place of the admin token.
fn without_token(db: &TestDb, listen: &str, server: &str) -> String {
    config_toml(db, "dry_run = true\n")
        .replace(&format!("admin_token = \"{ADMIN}\"\n"), server)
        .replace(
            "listen = \"127.0.0.1:0\"",
            &format!("listen = \"{listen}\""),
        )
}

fn load(text: &str) -> Result<feishu_bridge::Config, String> {
    feishu_bridge::config::load_from_str(text, &|_| None).map_err(|e| e.to_string())
}

#[test]
fn a_public_address_without_a_token_is_refused_unless_explicitly_allowed() {
    let db = TestDb::sqlite();
    for listen in ["0.0.0.0:8080", "[::]:8080", "192.0.2.10:8080"] {
        let err = load(&without_token(&db, listen, "")).expect_err("refused");
        assert!(err.contains("server.admin_token"), "{listen}: {err}");
        load(&without_token(
            &db,
            listen,
            "allow_unauthenticated = true\n",
        ))
        .unwrap_or_else(|e| panic!("{listen}, explicitly allowed: {e}"));
    }
    for listen in ["127.0.0.1:8080", "[::1]:8080"] {
        load(&without_token(&db, listen, ""))
            .unwrap_or_else(|e| panic!("{listen} is loopback: {e}"));
    }
}

#[tokio::test]
async fn allowed_unauthenticated_routes_are_open_and_a_token_still_binds() {
    let db = TestDb::sqlite();
    let open = load(&without_token(
        &db,
        "0.0.0.0:0",
        "allow_unauthenticated = true\n",
    ))
    .expect("explicitly allowed");
    let mut app = TestApp::spawn(open).await;
    assert_eq!(
        app.ask(&Msg::group("om_open", "hello").at_bot()).await,
        "answered"
    );
    for path in [
        "/status",
        "/turns",
        "/sessions",
        "/explain/message/om_open?profile=planner",
    ] {
        let a = app.get_anonymous(path).await;
        assert_eq!(a.status, 200, "{path}: {}", a.text);
    }
    app.stop().await.expect("clean stop");

    // allow_unauthenticated does not waive a token that is set.
    let text = without_token(
        &db,
        "0.0.0.0:0",
        &format!("admin_token = \"{ADMIN}\"\nallow_unauthenticated = true\n"),
    );
    let app = TestApp::spawn(load(&text).expect("valid")).await;
    for path in ["/status", "/turns", "/sessions"] {
        let a = app.get_anonymous(path).await;
        assert_eq!((a.status, a.code()), (401, "unauthorized"), "{path}");
        assert_eq!(app.get(path).await.status, 200, "{path} with the token");
    }
    app.stop().await.expect("clean stop");
}
