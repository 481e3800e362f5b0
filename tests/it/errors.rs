//! Each rejection class: status, error code, and nothing stored.

use crate::{
    both_backends,
    support::{Signer, TestApp, TestDb, config, config_toml, feishu},
};

/// A second profile without an encrypt key.
const PLAIN_PROFILE: &str = r#"
[[profiles]]
name = "plain"
app_id = "cli_plain"
verification_token = "plain-token"
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
        (row.event_type.as_str(), row.status.as_str()),
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
