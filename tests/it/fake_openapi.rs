//! The fake Open API itself: it must refuse what Feishu refuses, with Feishu's codes,
//! and keep what tests read back. Plain HTTP against the fake (no bridge), and the
//! sliding window with explicit instants (no sleeps, no timing assertions).

use std::{
    sync::atomic::Ordering,
    time::{Duration, Instant},
};

use reqwest::Method;
use serde_json::{Value, json};

use crate::support::fake_feishu::{
    APP_PER_MIN, APP_PER_SEC, CARD_MAX_BYTES, CARDKIT_OPS_PER_SEC_PER_CARD, CardEntity, CardOp,
    FakeFeishu, PATCH_PER_SEC_PER_MESSAGE, SlidingWindow, Storm, TEXT_MAX_BYTES, mention_tags,
};

/// A client of the fake holding a tenant token.
pub(crate) struct Api {
    pub(crate) fake: FakeFeishu,
    http: reqwest::Client,
    token: String,
}

/// An answer: HTTP status, body, and the reset header when there is one.
pub(crate) struct Got {
    pub(crate) status: u16,
    pub(crate) json: Value,
    reset: Option<String>,
}

impl Got {
    pub(crate) fn code(&self) -> i64 {
        self.json["code"].as_i64().unwrap_or(-1)
    }

    /// The id of the message a send created.
    pub(crate) fn message_id(&self) -> String {
        self.json["data"]["message_id"]
            .as_str()
            .expect("a message id")
            .to_string()
    }
}

impl Api {
    pub(crate) async fn new() -> Self {
        let fake = FakeFeishu::planner().await;
        let http = reqwest::Client::new();
        let answer: Value = http
            .post(format!(
                "{}/open-apis/auth/v3/tenant_access_token/internal",
                fake.base
            ))
            .json(&json!({"app_id": "cli_test", "app_secret": "s"}))
            .send()
            .await
            .expect("token answered")
            .json()
            .await
            .expect("token JSON");
        let token = answer["tenant_access_token"].as_str().expect("a token");
        Self {
            token: token.to_string(),
            fake,
            http,
        }
    }

    pub(crate) fn request(&self, method: Method, path: &str) -> reqwest::RequestBuilder {
        self.http
            .request(method, format!("{}{path}", self.fake.base))
            .bearer_auth(&self.token)
    }

    pub(crate) async fn call(&self, method: Method, path: &str, body: &Value) -> Got {
        let resp = self
            .request(method, path)
            .json(body)
            .send()
            .await
            .expect("answered");
        let status = resp.status().as_u16();
        let reset = resp
            .headers()
            .get("x-ogw-ratelimit-reset")
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        let text = resp.text().await.expect("a body");
        let json = serde_json::from_str(&text).unwrap_or(Value::String(text));
        Got {
            status,
            json,
            reset,
        }
    }

    pub(crate) async fn send(&self, msg_type: &str, content: &Value, uuid: &str) -> Got {
        let body = json!({"receive_id": "oc_chat", "msg_type": msg_type,
            "content": content.to_string(), "uuid": uuid});
        let path = "/open-apis/im/v1/messages?receive_id_type=chat_id";
        self.call(Method::POST, path, &body).await
    }

    pub(crate) async fn reply(&self, to: &str, body: Value) -> Got {
        let path = format!("/open-apis/im/v1/messages/{to}/reply");
        self.call(Method::POST, &path, &body).await
    }

    pub(crate) async fn create_card(&self, card: &Value) -> Got {
        let body = json!({"type": "card_json", "data": card.to_string()});
        self.call(Method::POST, "/open-apis/cardkit/v1/cards", &body)
            .await
    }

    /// Creates `card` and returns its id.
    pub(crate) async fn entity(&self, card: &Value) -> String {
        let got = self.create_card(card).await;
        assert_eq!(got.code(), 0, "{}", got.json);
        got.json["data"]["card_id"]
            .as_str()
            .expect("card_id")
            .to_string()
    }

    pub(crate) async fn stream(
        &self,
        card_id: &str,
        element: &str,
        text: &str,
        sequence: i64,
    ) -> Got {
        let path = format!("/open-apis/cardkit/v1/cards/{card_id}/elements/{element}/content");
        let body = json!({"content": text, "sequence": sequence});
        self.call(Method::PUT, &path, &body).await
    }

    pub(crate) async fn settings(&self, card_id: &str, config: Value, sequence: i64) -> Got {
        let path = format!("/open-apis/cardkit/v1/cards/{card_id}/settings");
        let settings = json!({ "config": config }).to_string();
        let body = json!({"settings": settings, "sequence": sequence});
        self.call(Method::PATCH, &path, &body).await
    }

    pub(crate) fn sent(&self) -> usize {
        self.fake.state.sent.lock().expect("lock").len()
    }
}

/// A schema 2.0 card with one markdown element `answer` holding `text`.
pub(crate) fn streaming_card(text: &str) -> Value {
    json!({"schema": "2.0", "config": {"streaming_mode": true, "update_multi": true},
        "body": {"elements": [{"tag": "markdown", "element_id": "answer", "content": text}]}})
}

/// An interactive card (schema 1 style, as PATCH takes) showing `text`.
pub(crate) fn message_card(text: &str) -> Value {
    json!({"config": {"update_multi": true},
        "body": {"elements": [{"tag": "markdown", "content": text}]}})
}

#[tokio::test]
async fn fake_refuses_oversized_cards_and_accepts_long_text() {
    let api = Api::new().await;
    let big = "x".repeat(CARD_MAX_BYTES + 1024); // 31 KB
    let got = api
        .send("interactive", &message_card(&big), "u-big-card")
        .await;
    assert_eq!((got.status, got.code()), (400, 230025), "{}", got.json);
    let post = json!({"zh_cn": {"title": "t", "content": [[{"tag": "md", "text": big}]]}});
    let got = api.send("post", &post, "u-big-post").await;
    assert_eq!(got.code(), 230025);
    assert_eq!(api.sent(), 0, "nothing created");

    let got = api.create_card(&streaming_card(&big)).await;
    assert_eq!((got.status, got.code()), (400, 200860), "{}", got.json);
    assert!(api.fake.state.cards.lock().expect("lock").is_empty());

    let text = "y".repeat(100 * 1024);
    let got = api.send("text", &json!({ "text": text }), "u-text").await;
    assert_eq!(got.code(), 0, "100 KB of text is within 150 KB");
    let small_post =
        json!({"zh_cn": {"title": "t", "content": [[{"tag": "md", "text": "**hi**"}]]}});
    assert_eq!(api.send("post", &small_post, "u-post").await.code(), 0);
    let too_long = "z".repeat(TEXT_MAX_BYTES);
    let got = api
        .send("text", &json!({ "text": too_long }), "u-huge")
        .await;
    assert_eq!(got.code(), 230025);

    let id = api.fake.state.uuids.lock().expect("lock")["u-text"]
        .0
        .clone();
    let path = format!("/open-apis/im/v1/messages/{id}");
    let body = json!({"content": message_card(&big).to_string()});
    let got = api.call(Method::PATCH, &path, &body).await;
    assert_eq!(got.code(), 230025);
    assert!(api.fake.state.patches.lock().expect("lock").is_empty());
    assert_eq!(api.sent(), 2);
    let refusals = api.fake.state.refusals.lock().expect("lock").clone();
    assert!(refusals.contains(&("POST /open-apis/im/v1/messages".into(), 230025)));
    assert!(refusals.contains(&("POST /open-apis/cardkit/v1/cards".into(), 200860)));
    assert!(api.fake.state.violations.lock().expect("lock").is_empty());
}

#[tokio::test]
async fn fake_answers_a_repeated_uuid_with_the_first_message() {
    let api = Api::new().await;
    let first = api.send("text", &json!({"text": "one"}), "u-same").await;
    let again = api.send("text", &json!({"text": "two"}), "u-same").await;
    assert_eq!(first.code(), 0);
    assert_eq!(
        first.json["data"]["message_id"],
        again.json["data"]["message_id"]
    );
    let sent = api.fake.state.sent.lock().expect("lock").clone();
    assert_eq!(sent.len(), 1);
    assert!(sent[0].1["content"].as_str().unwrap_or("").contains("one"));
    assert_eq!(api.fake.state.send_attempts.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn fake_refuses_thread_replies_where_the_chat_has_none() {
    let api = Api::new().await;
    api.fake
        .state
        .no_thread
        .lock()
        .expect("lock")
        .insert("om_flat".into());
    let text = json!({"text": "hi"}).to_string();
    let body = |uuid: &str, thread: Option<bool>| {
        let mut b = json!({"msg_type": "text", "content": text, "uuid": uuid});
        if let Some(t) = thread {
            b["reply_in_thread"] = json!(t);
        }
        b
    };
    let got = api.reply("om_flat", body("u-1", Some(true))).await;
    assert_eq!((got.status, got.code()), (400, 230071), "{}", got.json);
    assert_eq!(api.sent(), 0);
    assert_eq!(
        api.reply("om_flat", body("u-2", Some(false))).await.code(),
        0
    );
    assert_eq!(api.reply("om_flat", body("u-3", None)).await.code(), 0);
    assert_eq!(
        api.reply("om_other", body("u-4", Some(true))).await.code(),
        0
    );
    assert_eq!(api.sent(), 3);
}

#[tokio::test]
async fn fake_refuses_replies_to_recalled_messages_and_counts_them() {
    let api = Api::new().await;
    let state = &api.fake.state;
    state
        .recalled
        .lock()
        .expect("lock")
        .insert("om_gone".into());
    state
        .messages
        .lock()
        .expect("lock")
        .insert("om_gone".into(), "was here".into());
    let body = json!({"msg_type": "text", "content": "{\"text\":\"hi\"}", "uuid": "u-r"});
    let got = api.reply("om_gone", body).await;
    assert_eq!((got.status, got.code()), (400, 230011), "{}", got.json);
    let got = api
        .call(Method::GET, "/open-apis/im/v1/messages/om_gone", &json!({}))
        .await;
    assert_eq!(got.code(), 230011);
    assert_eq!(state.calls_to_recalled.load(Ordering::SeqCst), 2);
    assert_eq!(api.sent(), 0);
}

#[tokio::test]
async fn fake_cardkit_sequences_must_grow_strictly() {
    let api = Api::new().await;
    let mut activity = api.fake.state.activity.subscribe();
    let card = api.entity(&streaming_card("")).await;
    assert_eq!(api.stream(&card, "answer", "He", 1).await.code(), 0);
    for stale in [1, 0, -3] {
        let got = api.stream(&card, "answer", "stale", stale).await;
        assert_eq!((got.status, got.code()), (400, 300317), "{stale}");
    }
    assert_eq!(api.stream(&card, "answer", "Hello", 2).await.code(), 0);
    // The rule spans every CardKit call on the card.
    let got = api
        .settings(&card, json!({"streaming_mode": false}), 2)
        .await;
    assert_eq!(got.code(), 300317);
    assert_eq!(api.fake.state.entity_text(&card).as_deref(), Some("Hello"));
    let entity: CardEntity = api.fake.state.cards.lock().expect("lock")[&card].clone();
    assert_eq!(entity.last_sequence, 2);
    let ops: Vec<CardOp> = api.fake.state.card_ops.lock().expect("lock").clone();
    let seen: Vec<_> = ops.iter().map(|o| (o.op, o.sequence, o.refused)).collect();
    assert_eq!(
        seen,
        [
            ("create", None, None),
            ("content", Some(1), None),
            ("content", Some(1), Some(300317)),
            ("content", Some(0), Some(300317)),
            ("content", Some(-3), Some(300317)),
            ("content", Some(2), None),
            ("settings", Some(2), Some(300317)),
        ]
    );
    let mut lines = Vec::new();
    while let Ok(line) = activity.try_recv() {
        lines.push(line);
    }
    assert!(
        lines.contains(&format!("cardkit:create:{card}")),
        "{lines:?}"
    );
    assert!(
        lines.contains(&format!("cardkit:content:{card}")),
        "{lines:?}"
    );
    assert!(lines.contains(&"refused:300317".to_string()), "{lines:?}");
    assert!(api.fake.state.violations.lock().expect("lock").is_empty());
}

#[tokio::test]
async fn fake_cardkit_refuses_streaming_into_a_closed_card() {
    let api = Api::new().await;
    let card = api.entity(&streaming_card("draft")).await;
    let got = api
        .settings(&card, json!({"streaming_mode": false}), 1)
        .await;
    assert_eq!(got.code(), 0, "{}", got.json);
    let got = api.stream(&card, "answer", "more", 2).await;
    assert_eq!((got.status, got.code()), (400, 300309));
    assert_eq!(api.fake.state.entity_text(&card).as_deref(), Some("draft"));
    // A full update replaces the card, and the sequence rule holds for it too.
    let body = json!({"card": {"type": "card_json", "data": streaming_card("final").to_string()},
        "sequence": 2});
    let path = format!("/open-apis/cardkit/v1/cards/{card}");
    assert_eq!(api.call(Method::PUT, &path, &body).await.code(), 0);
    assert_eq!(api.call(Method::PUT, &path, &body).await.code(), 300317);
    assert_eq!(api.fake.state.entity_text(&card).as_deref(), Some("final"));
}

#[tokio::test]
async fn fake_cardkit_refuses_unknown_elements_and_cards() {
    let api = Api::new().await;
    let nested = json!({"schema": "2.0", "config": {"streaming_mode": true},
        "body": {"elements": [{"tag": "column_set", "columns": [{"tag": "column",
            "elements": [{"tag": "markdown", "element_id": "deep", "content": ""}]}]}]}});
    let card = api.entity(&nested).await;
    let got = api.stream(&card, "nowhere", "x", 1).await;
    assert_eq!((got.status, got.code()), (400, 300315));
    assert_eq!(api.stream(&card, "deep", "found", 1).await.code(), 0);
    assert_eq!(
        api.stream(&card, "deep", "", 2).await.code(),
        10002,
        "empty"
    );
    assert_eq!(api.fake.state.entity_text(&card).as_deref(), Some("found"));
    let got = api.stream("7000000000000000000", "answer", "x", 1).await;
    assert_eq!(got.code(), 200740);
    let v1 = json!({"config": {}, "elements": []});
    assert_eq!(api.create_card(&v1).await.code(), 300303);
}

#[tokio::test]
async fn fake_cardkit_needs_its_scope_and_the_token() {
    let api = Api::new().await;
    api.fake.state.cardkit_refused.store(true, Ordering::SeqCst);
    let got = api.create_card(&streaming_card("")).await;
    assert_eq!((got.status, got.code()), (400, 99991672), "{}", got.json);
    assert!(
        got.json["msg"]
            .as_str()
            .unwrap_or("")
            .contains("cardkit:card:write")
    );
    api.fake
        .state
        .cardkit_refused
        .store(false, Ordering::SeqCst);
    api.fake.state.revoke_token();
    assert_eq!(api.create_card(&streaming_card("")).await.code(), 99991663);
}

#[tokio::test]
async fn fake_sends_a_card_entity_once_and_shows_it() {
    let api = Api::new().await;
    let card = api.entity(&streaming_card("")).await;
    let content = json!({"type": "card", "data": {"card_id": card}});
    let got = api.send("interactive", &content, "u-card").await;
    assert_eq!(got.code(), 0, "{}", got.json);
    let id = got.message_id();
    assert_eq!(api.fake.state.entity_of(&id), Some(card.clone()));
    assert_eq!(
        api.send("interactive", &content, "u-again").await.code(),
        230001
    );
    assert_eq!(api.stream(&card, "answer", "live", 1).await.code(), 0);
    let shown = api.fake.state.shown_card(&id).expect("a card");
    assert_eq!(shown["body"]["elements"][0]["content"], "live");

    // A plain card shows what it was posted with, then its latest update.
    let got = api
        .send("interactive", &message_card("posted"), "u-plain")
        .await;
    let plain = got.message_id();
    let shown = api.fake.state.shown_card(&plain).expect("a card");
    assert_eq!(shown["body"]["elements"][0]["content"], "posted");
    let path = format!("/open-apis/im/v1/messages/{plain}");
    let body = json!({"content": message_card("patched").to_string()});
    assert_eq!(api.call(Method::PATCH, &path, &body).await.code(), 0);
    assert_eq!(api.fake.state.card_text(&plain).as_deref(), Some("patched"));
    let shown = api.fake.state.shown_card(&plain).expect("a card");
    assert_eq!(shown["body"]["elements"][0]["content"], "patched");
}

#[tokio::test]
async fn fake_storm_refuses_matching_paths_with_the_given_reset() {
    let api = Api::new().await;
    *api.fake.state.storm.lock().expect("lock") = Some(Storm {
        path_contains: "/reply".into(),
        reset_secs: 7,
    });
    let body = json!({"msg_type": "text", "content": "{\"text\":\"hi\"}", "uuid": "u-s"});
    let got = api.reply("om_x", body.clone()).await;
    assert_eq!((got.status, got.code()), (429, 99991400), "{}", got.json);
    assert_eq!(got.reset.as_deref(), Some("7"));
    assert_eq!(api.sent(), 0);
    assert_eq!(
        api.send("text", &json!({"text": "hi"}), "u-t").await.code(),
        0
    );
    assert_eq!(api.fake.state.storm_refusals.load(Ordering::SeqCst), 1);
    assert!(api.fake.state.violations.lock().expect("lock").is_empty());
    *api.fake.state.storm.lock().expect("lock") = None;
    assert_eq!(api.reply("om_x", body).await.code(), 0);
}

#[tokio::test]
async fn fake_lost_answer_still_creates_the_message() {
    let api = Api::new().await;
    api.fake.state.lose_answers.store(1, Ordering::SeqCst);
    let body = json!({"receive_id": "oc_chat", "msg_type": "text",
        "content": "{\"text\":\"hi\"}", "uuid": "u-lost"});
    let path = "/open-apis/im/v1/messages?receive_id_type=chat_id";
    let outcome = api.request(Method::POST, path).json(&body).send().await;
    let transport_error = match outcome {
        Err(_) => true,
        Ok(resp) => resp.bytes().await.is_err(),
    };
    assert!(transport_error, "the client must not get the answer");
    assert_eq!(api.sent(), 1, "the message exists");
    let id = api.fake.state.uuids.lock().expect("lock")["u-lost"]
        .0
        .clone();
    // The retry with the same uuid gets the message that was created.
    let got = api.call(Method::POST, path, &body).await;
    assert_eq!(got.json["data"]["message_id"], json!(id));
    assert_eq!(api.sent(), 1);
}

#[tokio::test]
async fn fake_server_error_is_a_502_without_json_and_creates_nothing() {
    let api = Api::new().await;
    api.fake.state.server_errors.store(1, Ordering::SeqCst);
    let got = api.send("text", &json!({"text": "hi"}), "u-502").await;
    assert_eq!(got.status, 502);
    assert!(got.json.is_string(), "not JSON: {}", got.json);
    assert_eq!(api.sent(), 0);
    assert_eq!(
        api.send("text", &json!({"text": "hi"}), "u-502")
            .await
            .code(),
        0
    );
    assert_eq!(api.sent(), 1);
}

#[tokio::test]
async fn fake_records_every_mention_it_accepts() {
    let api = Api::new().await;
    let text = json!({"text": "hi <at user_id=\"ou_1\">Ann</at>, <attach> is no mention"});
    assert_eq!(api.send("text", &text, "u-m1").await.code(), 0);
    let post = json!({"zh_cn": {"title": "", "content": [
        [{"tag": "md", "text": "cc <AT\tid=all></at>"}],
        [{"tag": "at", "user_id": "ou_2"}]]}});
    assert_eq!(api.send("post", &post, "u-m2").await.code(), 0);
    let card = api.entity(&streaming_card("")).await;
    assert_eq!(
        api.stream(&card, "answer", "<at id=ou_3/>", 1).await.code(),
        0
    );
    let notified = api.fake.state.notified.lock().expect("lock").clone();
    assert_eq!(
        notified,
        [
            "<at user_id=\"ou_1\">",
            "<AT\tid=all>",
            "<at user_id=\"ou_2\">",
            "<at id=ou_3/>"
        ]
    );
    assert_eq!(mention_tags("a <at>b</at> <at"), ["<at>"]);
    assert_eq!(mention_tags("x <at id=1"), ["<at id=1"], "unterminated");
    assert!(mention_tags("<attribute> <a href=x> at>").is_empty());
}

#[test]
fn fake_window_refuses_over_the_limit_and_says_when_to_come_back() {
    let t0 = Instant::now();
    let ms = Duration::from_millis;
    let mut w = SlidingWindow::new(PATCH_PER_SEC_PER_MESSAGE, Duration::from_secs(1));
    for i in 0..5 {
        assert_eq!(w.attempt(t0 + ms(i * 100)), Ok(()), "attempt {i}");
    }
    // Refused attempts count, so one more fits once the attempts at 0 and 100 ms are
    // out, at 1.1 s: 0.6 s away, answered as 1 s.
    assert_eq!(w.attempt(t0 + ms(500)), Err(1));
    assert_eq!(w.counted(t0 + ms(500)), 6, "refused attempts count");
    // At 1 s the first attempt is out, but 100..=500 ms (the refused one too) are not.
    assert_eq!(w.attempt(t0 + ms(1000)), Err(1));
    assert_eq!(w.attempt(t0 + ms(2600)), Ok(()), "all expired");
    assert_eq!(w.counted(t0 + ms(2600)), 1);
}

#[test]
fn fake_window_reset_rounds_up_to_whole_seconds() {
    let t0 = Instant::now();
    let mut minute = SlidingWindow::new(APP_PER_MIN, Duration::from_secs(60));
    for i in 0..APP_PER_MIN as u64 {
        assert!(minute.attempt(t0 + Duration::from_millis(i * 10)).is_ok());
    }
    // 1000 attempts over 10 s: the second one (t0 + 10 ms) frees a slot at t0 + 60.01 s.
    let now = t0 + Duration::from_secs(10);
    assert_eq!(minute.attempt(now), Err(51));
    let mut second = SlidingWindow::new(APP_PER_SEC, Duration::from_secs(1));
    for _ in 0..APP_PER_SEC {
        assert!(second.attempt(t0).is_ok());
    }
    assert_eq!(second.attempt(t0), Err(1), "never less than 1");
    assert_eq!(second.attempt(t0 + Duration::from_secs(1)), Ok(()));
    let mut cards = SlidingWindow::new(CARDKIT_OPS_PER_SEC_PER_CARD, Duration::from_secs(1));
    let burst: Vec<_> = (0..11).map(|_| cards.attempt(t0).is_ok()).collect();
    assert_eq!(burst.iter().filter(|ok| **ok).count(), 10);
}
