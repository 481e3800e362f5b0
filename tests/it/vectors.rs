//! Every vector of the shared Feishu test-vector file, through the HTTP endpoint.

use serde_json::{Value, json};

use crate::{
    both_backends,
    support::{TestApp, TestDb, config},
};

fn vectors() -> Vec<Value> {
    let text = include_str!("../fixtures/feishu-vectors.json");
    serde_json::from_str(text).expect("vectors parse")
}

/// One profile per distinct (encrypt key, token) pair of the vectors. The vectors were
/// made in 2025, so the freshness window is off here (it has its own tests).
fn vector_config(db: &TestDb) -> String {
    format!(
        r#"
[server]
timestamp_tolerance_secs = 0
[database]
url = "{}"
[[profiles]]
name = "main"
app_id = "cli_a1b2c3d4e5f60718"
encrypt_key = "kx9Vq2LmT7pR4sW1"
verification_token = "rvaYgkND1GOiu5MM0E1rncYC6PLtF7JV"
dry_run = true
[[profiles]]
name = "unicode-key"
app_id = "cli_a1b2c3d4e5f60718"
encrypt_key = "另一个 key with spaces/ünïcode"
verification_token = "rvaYgkND1GOiu5MM0E1rncYC6PLtF7JV"
dry_run = true
[[profiles]]
name = "doc-key"
app_id = "cli_doc"
encrypt_key = "test key"
verification_token = "unused-token"
dry_run = true
[[profiles]]
name = "java-key"
app_id = "cli_xxxxxxxx"
encrypt_key = "1212121212"
verification_token = "v"
dry_run = true
[[profiles]]
name = "plain"
app_id = "cli_a1b2c3d4e5f60718"
verification_token = "rvaYgkND1GOiu5MM0E1rncYC6PLtF7JV"
dry_run = true
"#,
        db.url
    )
}

fn profile_for(v: &Value) -> &'static str {
    match v["encrypt_key"].as_str().unwrap_or_default() {
        "kx9Vq2LmT7pR4sW1" => "main",
        "test key" => "doc-key",
        "1212121212" => "java-key",
        "" => "plain",
        _ => "unicode-key",
    }
}

async fn post_vector(app: &TestApp, v: &Value) -> crate::support::Answer {
    let kind = if v["kind"] == "legacy_card_v1" {
        "card"
    } else {
        "event"
    };
    let headers: Vec<(String, String)> = v["headers"]
        .as_object()
        .expect("headers")
        .iter()
        .map(|(k, v)| (k.to_lowercase(), v.as_str().unwrap_or_default().to_string()))
        .collect();
    let req = crate::support::Request {
        body: v["body"].as_str().expect("body").to_string(),
        headers,
    };
    app.post(profile_for(v), kind, &req).await
}

/// A vector's plaintext without its `header.token`, as a JSON value.
fn without_token(plaintext: &str) -> Value {
    let mut parsed: Value = serde_json::from_str(plaintext).expect("plaintext is JSON");
    let header = parsed["header"].as_object_mut().expect("a header");
    assert!(
        header.remove("token").is_some(),
        "the vector has a token member"
    );
    parsed
}

fn event_id_of(v: &Value) -> Option<String> {
    let plain: Value = serde_json::from_str(v["plaintext"].as_str()?).ok()?;
    plain["header"]["event_id"].as_str().map(str::to_string)
}

async fn vectors_through_http(db: TestDb) {
    let mut cfg = config(&vector_config(&db));
    cfg.worker.enabled = false;
    let app = TestApp::spawn(cfg).await;
    let all = vectors();
    assert_eq!(all.len(), 12, "the vector file changed; review this test");

    // Negative vectors first: they share an event id with a valid one, and a rejected
    // request must store nothing.
    for v in all.iter().filter(|v| v["expect_valid"] == false) {
        let name = v["name"].as_str().unwrap_or_default();
        let ans = post_vector(&app, v).await;
        let expected = if name == "negative_wrong_verification_token" {
            "bad_token"
        } else {
            "bad_signature"
        };
        assert_eq!(
            (ans.status, ans.code()),
            (401, expected),
            "{name}: {}",
            ans.text
        );
    }
    assert_eq!(
        db.count("inbox_events").await,
        0,
        "rejected vectors stored nothing"
    );

    for v in all.iter().filter(|v| v["expect_valid"] == true) {
        let name = v["name"].as_str().unwrap_or_default();
        let ans = post_vector(&app, v).await;
        match name {
            // "hello world" decrypts (so not `undecryptable`) but is not a callback.
            "official_doc_hello_world" => {
                assert_eq!(
                    (ans.status, ans.code()),
                    (400, "malformed_json"),
                    "{name}: {}",
                    ans.text
                );
            }
            // The vector's toast is what its test handler chose; the bridge answers {}
            // and acts on the action after the answer.
            "card_action_trigger_v2" | "legacy_card_action_trigger_v1" => {
                assert_eq!((ans.status, &ans.json), (200, &json!({})), "{name}");
            }
            "official_java_sdk_testdecryptor" => {
                assert_eq!(
                    (ans.status, &ans.json),
                    (200, &json!({"msg": "success"})),
                    "{name}"
                );
            }
            _ => assert_eq!(
                (ans.status, &ans.json),
                (200, &v["expected_response"]),
                "{name}"
            ),
        }
        if let Some(event_id) = event_id_of(v) {
            let stored = app
                .state
                .store
                .inbox_event(profile_for(v), &event_id)
                .await
                .expect("store answers");
            let stored = stored.unwrap_or_else(|| panic!("{name}: event not stored"));
            // The stored payload is the decrypted JSON less its verification token.
            let payload: Value = serde_json::from_str(&stored.event.payload).expect("stored JSON");
            assert_eq!(
                payload,
                without_token(v["plaintext"].as_str().unwrap_or_default()),
                "{name}"
            );
            let expected_status = if name == "official_java_sdk_testdecryptor" {
                "skipped"
            } else {
                "pending"
            };
            assert_eq!(stored.event.status.as_str(), expected_status, "{name}");
        }
    }
    // group text, p2p post, recalled, card v2, plaintext group text (another profile),
    // java contact event, legacy card.
    assert_eq!(db.count("inbox_events").await, 7);
    app.stop().await.expect("clean stop");
}
both_backends!(every_vector_through_the_endpoint, vectors_through_http);
