//! No CORS: the bridge installs no CORS layer, so a browser page on another origin can
//! neither pass a preflight nor read an answer. No answer, to a preflight or to an
//! ordinary request that names an `Origin`, on a REST route or a webhook, carries an
//! `Access-Control-*` header.

use reqwest::{Method, header::HeaderMap};

use crate::support::{
    ADMIN, Signer, TestApp, TestDb, app::answer, config, config_toml, feishu::Msg,
};

const ORIGIN: &str = "https://intranet.example";

fn cors_headers(headers: &HeaderMap) -> Vec<String> {
    headers
        .iter()
        .filter(|(name, _)| name.as_str().starts_with("access-control-"))
        .map(|(name, value)| format!("{name}: {value:?}"))
        .collect()
}

#[tokio::test]
async fn no_answer_carries_cors_headers() {
    let db = TestDb::sqlite();
    let mut app = TestApp::spawn(config(&config_toml(&db, "dry_run = true\n"))).await;
    assert_eq!(
        app.ask(&Msg::group("om_cors", "hi").at_bot()).await,
        "answered"
    );
    let turn_id = app.turn_of("om_cors").await.turn_id;

    let paths = [
        "/status".to_string(),
        "/turns".into(),
        format!("/turns/{turn_id}"),
        "/sessions".into(),
        "/explain/message/om_cors".into(),
        "/feed?session_key=x".into(),
        "/digests/run".into(),
        "/metrics".into(),
        "/healthz".into(),
        "/webhook/planner/event".into(),
        "/webhook/planner/card".into(),
        format!("/agent/planner/turns/{turn_id}/output"),
        format!("/agent/planner/turns/{turn_id}/events"),
        format!("/agent/planner/turns/{turn_id}/asks/q1"),
    ];
    for path in &paths {
        for method in ["GET", "POST", "DELETE"] {
            let r = app
                .client
                .request(Method::OPTIONS, format!("{}{path}", app.base))
                .header("origin", ORIGIN)
                .header("access-control-request-method", method)
                .header(
                    "access-control-request-headers",
                    "authorization, content-type",
                )
                .send()
                .await
                .expect("sent");
            assert!(
                cors_headers(r.headers()).is_empty(),
                "OPTIONS {path}: {:?}",
                r.headers()
            );
            // The preflight is no route of ours: the method is not allowed.
            assert_eq!(r.status(), 405, "OPTIONS {path}");
        }
    }

    // Ordinary requests naming an Origin: answered as usual, without CORS headers.
    let get = |path: &str, token: bool| {
        let rb = app
            .client
            .get(format!("{}{path}", app.base))
            .header("origin", ORIGIN);
        if token { rb.bearer_auth(ADMIN) } else { rb }
    };
    let turn_path = format!("/turns/{turn_id}");
    for (path, token, status) in [
        ("/status", true, 200),
        ("/status", false, 401),
        ("/turns?verbose=true", true, 200),
        (turn_path.as_str(), true, 200),
        ("/metrics", false, 200),
        ("/healthz", false, 200),
        ("/no/such/route", false, 404),
    ] {
        let r = get(path, token).send().await.expect("sent");
        assert!(
            cors_headers(r.headers()).is_empty(),
            "GET {path}: {:?}",
            r.headers()
        );
        assert_eq!(r.status(), status, "GET {path}");
    }
    let delivery = Signer::default().message("ev-cors", "om-cors-2", "from a page?");
    let r = delivery
        .apply(
            app.client
                .post(format!("{}/webhook/planner/event", app.base)),
        )
        .header("origin", ORIGIN)
        .send()
        .await
        .expect("sent");
    assert!(cors_headers(r.headers()).is_empty(), "{:?}", r.headers());
    assert_eq!(answer(r).await.status, 200);
    let r = app
        .client
        .post(format!("{}/webhook/planner/card", app.base))
        .header("origin", ORIGIN)
        .body("{}")
        .send()
        .await
        .expect("sent");
    assert!(cors_headers(r.headers()).is_empty(), "{:?}", r.headers());
    assert_eq!(r.status(), 401, "an unsigned card callback");
    let r = app
        .client
        .post(format!("{}/feed/flush?session_key=x", app.base))
        .header("origin", ORIGIN)
        .send()
        .await
        .expect("sent");
    assert!(cors_headers(r.headers()).is_empty(), "{:?}", r.headers());
    assert_eq!(r.status(), 401);
    app.stop().await.expect("clean stop");
}
