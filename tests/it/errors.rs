//! Each rejection class: status, error code, and nothing stored.

use crate::{
    both_backends,
    support::{ADMIN, Signer, TestApp, TestDb, config, config_toml, feishu},
};

/// A second profile without an encrypt key.
const PLAIN_PROFILE: &str = r#"
[[profiles]]
name = "plain"
app_id = "cli_plain"
verification_token = "plain-token"
dry_run = true
"#;

async fn rejections_store_nothing(db: TestDb) {
    let mut cfg = config(&config_toml(&db, PLAIN_PROFILE));
    cfg.server.timestamp_tolerance_secs = 300;
    cfg.server.max_body_bytes = 4096;
    cfg.worker.enabled = false;
    let app = TestApp::spawn(cfg).await;
    let signer = Signer::default();
    let good = signer.message("ev-1", "om-1", "hello");

    // bad_signature: wrong signature, and no signature at all.
    let wrong = good
        .clone()
        .with_header("x-lark-signature", &"0".repeat(64));
    let a = app.event(&wrong).await;
    assert_eq!((a.status, a.code()), (401, "bad_signature"), "{}", a.text);
    let a = app.event(&good.clone().unsigned()).await;
    assert_eq!((a.status, a.code()), (401, "bad_signature"), "{}", a.text);

    // bad_token: correctly encrypted and signed, wrong token inside.
    let impostor = Signer {
        token: "not-the-token".into(),
        ..Signer::default()
    };
    let a = app.event(&impostor.message("ev-2", "om-2", "hi")).await;
    assert_eq!((a.status, a.code()), (401, "bad_token"), "{}", a.text);

    // stale_timestamp: signed an hour and a bit ago, outside a 300 s window.
    let plaintext = signer.envelope(
        "ev-3",
        "im.message.receive_v1",
        feishu::message_event("om-3", "x"),
    );
    let a = app
        .event(&signer.request_at(&plaintext, feishu::now_secs() - 4000))
        .await;
    assert_eq!((a.status, a.code()), (401, "stale_timestamp"), "{}", a.text);

    // undecryptable: signed with the right key, but the ciphertext is garbage.
    let a = app
        .event(&signer.signed_raw_encrypt("bm90IGEgY2lwaGVydGV4dCBhdCBhbGwhISEhISEhISEhISE="))
        .await;
    assert_eq!((a.status, a.code()), (400, "undecryptable"), "{}", a.text);
    // ... and an unsigned garbage ciphertext is just unsigned: no padding oracle.
    let a = app
        .event(
            &signer
                .signed_raw_encrypt("AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=")
                .unsigned(),
        )
        .await;
    assert_eq!((a.status, a.code()), (401, "bad_signature"), "{}", a.text);

    // malformed_json: not JSON at all; and signed, decryptable, but not a callback.
    let not_json = crate::support::Request {
        body: "{not json".into(),
        headers: vec![],
    };
    let a = app.post("plain", "event", &not_json).await;
    assert_eq!((a.status, a.code()), (400, "malformed_json"), "{}", a.text);
    let a = app.event(&signer.request(r#"{"hello":"world"}"#)).await;
    assert_eq!((a.status, a.code()), (400, "malformed_json"), "{}", a.text);
    // A JSON array is no callback, even one holding a real encrypted event where an
    // envelope's first member would be: it is not read by position.
    let real = signer.message("ev-array", "om-array", "hi");
    let encrypt: serde_json::Value = serde_json::from_str(&real.body).expect("JSON");
    let array = format!("[{}]", encrypt["encrypt"]);
    let a = app.event(&signer.signed_body(array)).await;
    assert_eq!((a.status, a.code()), (400, "malformed_json"), "{}", a.text);
    let plain_array = crate::support::Request {
        body:
            r#"["2.0", {"event_id": "ev-x", "token": "t", "event_type": "im.message.receive_v1"}]"#
                .into(),
        headers: vec![],
    };
    let a = app.post("plain", "event", &plain_array).await;
    assert_eq!((a.status, a.code()), (400, "malformed_json"), "{}", a.text);

    // unknown_profile.
    let a = app.post("nobody", "event", &good).await;
    assert_eq!((a.status, a.code()), (404, "unknown_profile"), "{}", a.text);

    // payload_too_large: over server.max_body_bytes.
    let huge = signer.message("ev-4", "om-4", &"x".repeat(8000));
    let a = app.event(&huge).await;
    assert_eq!(
        (a.status, a.code()),
        (413, "payload_too_large"),
        "{}",
        a.text
    );

    // Error bodies never echo internals or secrets.
    assert!(!a.text.contains(feishu::ENCRYPT_KEY) && !a.text.contains(feishu::TOKEN));

    assert_eq!(
        db.count("inbox_events").await,
        0,
        "no rejected request stored anything"
    );

    // The same good request is still accepted afterwards.
    let a = app.event(&good).await;
    assert_eq!(a.status, 200, "{}", a.text);
    assert_eq!(db.count("inbox_events").await, 1);

    // Rejections are counted by outcome.
    let metrics = app.get_anonymous("/metrics").await.text;
    for code in [
        "bad_signature",
        "bad_token",
        "stale_timestamp",
        "undecryptable",
        "malformed_json",
        "payload_too_large",
    ] {
        assert!(
            metrics.contains(&format!("outcome=\"{code}\",profile=\"planner\""))
                || metrics.contains(&format!("outcome=\"{code}\",profile=\"plain\"")),
            "{code} not counted:\n{metrics}"
        );
    }
    assert!(metrics.contains(r#"feishu_bridge_webhook_requests_total{kind="event",outcome="unknown_profile",profile="unknown"} 1"#), "{metrics}");
    app.stop().await.expect("clean stop");
}
both_backends!(
    each_error_class_is_rejected_and_stores_nothing,
    rejections_store_nothing
);

async fn plaintext_profiles_and_challenges(db: TestDb) {
    let mut cfg = config(&config_toml(&db, PLAIN_PROFILE));
    cfg.worker.enabled = false;
    let app = TestApp::spawn(cfg).await;

    // url_verification, encrypted, unsigned: answered after the token check.
    let signer = Signer::default();
    let challenge =
        r#"{"challenge":"c-123","token":"test-verification-token","type":"url_verification"}"#;
    let a = app.event(&signer.request(challenge).unsigned()).await;
    assert_eq!(
        (a.status, a.json["challenge"].as_str()),
        (200, Some("c-123")),
        "{}",
        a.text
    );
    let wrong = r#"{"challenge":"c-123","token":"nope","type":"url_verification"}"#;
    let a = app.event(&signer.request(wrong).unsigned()).await;
    assert_eq!((a.status, a.code()), (401, "bad_token"));

    // Plain profile: plaintext challenge, and a schema 1.0 event.
    let plain = Signer {
        encrypt_key: None,
        token: "plain-token".into(),
    };
    let c = r#"{"challenge":"c-9","token":"plain-token","type":"url_verification"}"#;
    let a = app
        .post("plain", "event", &plain.request(c).unsigned())
        .await;
    assert_eq!(a.json["challenge"], "c-9");
    let v1 = format!(
        r#"{{"ts":"{}.123","uuid":"v1-uuid-1","token":"plain-token","type":"event_callback","event":{{"type":"p2p_chat_create","chat_id":"oc_1"}}}}"#,
        feishu::now_secs()
    );
    let a = app.post("plain", "event", &plain.request(&v1)).await;
    assert_eq!(
        (a.status, &a.json),
        (200, &serde_json::json!({"msg": "success"})),
        "{}",
        a.text
    );
    let row = app
        .state
        .store
        .inbox_event("plain", "v1-uuid-1")
        .await
        .expect("store")
        .expect("stored");
    assert_eq!(
        (row.event.event_type.as_str(), row.event.status.as_str()),
        ("p2p_chat_create", "skipped")
    );

    // An encrypted body sent to a profile without a key cannot be read.
    let a = app
        .post("plain", "event", &signer.message("ev-x", "om-x", "hi"))
        .await;
    assert_eq!((a.status, a.code()), (400, "undecryptable"));

    // Challenges are answered, never stored.
    assert_eq!(db.count("inbox_events").await, 1);
    app.stop().await.expect("clean stop");
}
both_backends!(
    challenges_and_plaintext_profiles,
    plaintext_profiles_and_challenges
);

/// `(status, code, message)` of a request; asserts the JSON error shape on the way.
async fn shaped(resp: reqwest::Response) -> (u16, String, String) {
    let json_type = resp
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"));
    let a = crate::support::app::answer(resp).await;
    assert!(json_type, "not JSON: {} {}", a.status, a.text);
    let message = a.json["error"]["message"].as_str().unwrap_or_default();
    assert!(!message.is_empty(), "{}", a.text);
    (a.status, a.code().to_string(), message.to_string())
}

async fn framework_rejections(db: TestDb) {
    let mut cfg = config(&config_toml(&db, ""));
    cfg.server.max_body_bytes = 4096;
    cfg.worker.enabled = false;
    let app = TestApp::spawn(cfg).await;
    let get = |path: &str| {
        app.client
            .get(format!("{}{path}", app.base))
            .bearer_auth(ADMIN)
    };
    let send =
        |rb: reqwest::RequestBuilder| async move { shaped(rb.send().await.expect("sent")).await };

    // Query strings the handler cannot use: the parameter is named, its value is not.
    let (status, code, message) = send(get("/explain/om_x?verbose=maybe")).await;
    assert_eq!((status, code.as_str()), (400, "bad_request"), "{message}");
    assert!(
        message.contains("verbose") && !message.contains("maybe"),
        "{message}"
    );
    let (status, code, message) = send(get("/turns?limit=abc")).await;
    assert_eq!((status, code.as_str()), (400, "bad_request"), "{message}");
    assert!(
        message.contains("limit") && !message.contains("abc"),
        "{message}"
    );

    // A path segment that is not UTF-8 once percent-decoded.
    for path in ["/explain/%FF", "/sessions/%C3%28", "/turns/%FF%FE"] {
        let (status, code, message) = send(get(path)).await;
        assert_eq!(
            (status, code.as_str()),
            (400, "bad_request"),
            "{path}: {message}"
        );
    }
    let post = |path: &str| app.client.post(format!("{}{path}", app.base));
    let (status, code, _) = send(post("/webhook/%FF/event").body("{}")).await;
    assert_eq!((status, code.as_str()), (400, "bad_request"));
    let (status, code, _) = send(post("/agent/planner/turns/%FF/output").body("{}")).await;
    assert_eq!((status, code.as_str()), (400, "bad_request"));

    // A known path with a method it does not serve keeps its Allow header.
    let resp = post("/status")
        .bearer_auth(ADMIN)
        .send()
        .await
        .expect("sent");
    let allow = resp.headers().get("allow").cloned();
    let (status, code, _) = shaped(resp).await;
    assert_eq!((status, code.as_str()), (405, "method_not_allowed"));
    assert!(allow.is_some_and(|a| a.to_str().unwrap_or_default().contains("GET")));
    let resp = app
        .client
        .delete(format!("{}/webhook/planner/event", app.base))
        .send()
        .await
        .expect("sent");
    let (status, code, _) = shaped(resp).await;
    assert_eq!((status, code.as_str()), (405, "method_not_allowed"));

    // The agent callback's body extractor refuses an oversized body in our shape.
    let big = format!(r#"{{"output":"{}"}}"#, "x".repeat(8000));
    let (status, code, _) = send(post("/agent/planner/turns/turn_1/output").body(big)).await;
    assert_eq!((status, code.as_str()), (413, "payload_too_large"));

    // Client text is echoed bounded, never in full.
    let long = "p".repeat(10_000);
    let echoes = [
        get(&format!("/explain/message/om_x?profile={long}")),
        post(&format!("/webhook/{long}/event")).body("{}"),
        get(&format!("/sessions/{long}")),
        get(&format!("/turns/{long}")),
        get(&format!("/turns?state={long}")),
        post(&format!("/agent/{long}/turns/turn_1/output")).body("{}"),
    ];
    for rb in echoes {
        let (status, code, message) = send(rb).await;
        assert!(matches!(status, 400 | 404), "{status} {code}");
        assert!(message.chars().count() < 300, "{code}: {message}");
        assert!(
            message.contains('…') && !message.contains(&"p".repeat(100)),
            "{message}"
        );
    }

    // An unsigned body that is not JSON, to the keyed profile: unsigned first of all.
    let garbage = crate::support::Request {
        body: "not json at all".into(),
        headers: vec![],
    };
    let a = app.event(&garbage).await;
    assert_eq!((a.status, a.code()), (401, "bad_signature"), "{}", a.text);
    assert_eq!(db.count("inbox_events").await, 0, "nothing stored");
    app.stop().await.expect("clean stop");
}
both_backends!(
    framework_rejections_answer_in_the_error_shape,
    framework_rejections
);
