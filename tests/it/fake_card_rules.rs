//! The fake Open API's card and reply rules added for real-tenant races: a card in a
//! press takes no updates (200810), CardKit streaming closes after its window (200850)
//! until turned on again, and an aggregated message refuses a reply in thread (230072)
//! while its chat does not. Plain HTTP against the fake; the clock is moved, not waited.

use std::time::Duration;

use reqwest::Method;
use serde_json::json;

use crate::{
    fake_openapi::{Api, message_card, streaming_card},
    support::fake_feishu::STREAMING_WINDOW,
};

#[tokio::test]
async fn fake_refuses_updates_of_a_card_while_a_press_on_it_is_in_flight() {
    let api = Api::new().await;
    let card = api.entity(&streaming_card("")).await;
    let content = json!({"type": "card", "data": {"card_id": card}});
    let got = api.send("interactive", &content, "u-entity").await;
    let shown_in = got.message_id();
    let got = api
        .send("interactive", &message_card("posted"), "u-plain")
        .await;
    let plain = got.message_id();
    let patch = |text: &str| json!({"content": message_card(text).to_string()});
    let plain_path = format!("/open-apis/im/v1/messages/{plain}");

    let press = api.fake.state.interaction(&shown_in);
    let other = api.fake.state.interaction(&plain);
    let got = api.stream(&card, "answer", "x", 1).await;
    assert_eq!((got.status, got.code()), (400, 200810), "{}", got.json);
    let got = api
        .settings(&card, json!({"streaming_mode": false}), 2)
        .await;
    assert_eq!(got.code(), 200810);
    let got = api.call(Method::PATCH, &plain_path, &patch("during")).await;
    assert_eq!((got.status, got.code()), (400, 200810), "{}", got.json);
    drop(other);
    assert_eq!(
        api.call(Method::PATCH, &plain_path, &patch("after"))
            .await
            .code(),
        0
    );
    assert_eq!(api.stream(&card, "answer", "x", 3).await.code(), 200810);
    drop(press);
    // Refused operations used no sequence number.
    assert_eq!(api.stream(&card, "answer", "x", 1).await.code(), 0);
    let endpoint = "PUT /open-apis/cardkit/v1/cards/{card_id}/elements/{element_id}/content";
    assert_eq!(api.fake.state.refused_in_interaction(endpoint), 2);
    assert_eq!(api.fake.state.card_text(&plain).as_deref(), Some("after"));
}

#[tokio::test]
async fn fake_closes_streaming_after_its_window_until_it_is_turned_on_again() {
    let api = Api::new().await;
    api.fake.state.set_streaming_window(Duration::from_secs(60));
    let card = api.entity(&streaming_card("")).await;
    assert_eq!(api.stream(&card, "answer", "one", 1).await.code(), 0);
    api.fake.state.advance_clock(Duration::from_secs(61));
    let got = api.stream(&card, "answer", "one two", 2).await;
    assert_eq!((got.status, got.code()), (400, 200850), "{}", got.json);
    // A full update is not refused for it; turning streaming on starts a new window.
    let on = json!({"streaming_mode": true});
    assert_eq!(api.settings(&card, on.clone(), 2).await.code(), 0);
    assert_eq!(api.stream(&card, "answer", "one two", 3).await.code(), 0);
    api.fake.state.advance_clock(Duration::from_secs(59));
    assert_eq!(
        api.stream(&card, "answer", "one two three", 4).await.code(),
        0
    );
    api.fake.state.advance_clock(Duration::from_secs(1));
    assert_eq!(api.stream(&card, "answer", "late", 5).await.code(), 200850);
    let off = json!({"streaming_mode": false});
    assert_eq!(api.settings(&card, off, 5).await.code(), 0);
    assert_eq!(api.stream(&card, "answer", "late", 6).await.code(), 300309);
    let body = json!({"card": {"type": "card_json", "data": streaming_card("final").to_string()},
        "sequence": 6});
    let path = format!("/open-apis/cardkit/v1/cards/{card}");
    assert_eq!(api.call(Method::PUT, &path, &body).await.code(), 0);
    assert_eq!(api.fake.state.entity_text(&card).as_deref(), Some("final"));
    assert_eq!(
        STREAMING_WINDOW,
        Duration::from_secs(600),
        "Feishu's ten minutes"
    );
}

#[tokio::test]
async fn fake_refuses_a_thread_reply_to_an_aggregated_message_only() {
    let api = Api::new().await;
    api.fake
        .state
        .aggregated
        .lock()
        .expect("lock")
        .insert("om_merged".into());
    let body = |uuid: &str, thread: bool| {
        json!({"msg_type": "text", "content": "{\"text\":\"hi\"}", "uuid": uuid,
            "reply_in_thread": thread})
    };
    let got = api.reply("om_merged", body("u-1", true)).await;
    assert_eq!((got.status, got.code()), (400, 230072), "{}", got.json);
    assert_eq!(api.reply("om_merged", body("u-2", false)).await.code(), 0);
    assert_eq!(api.reply("om_plain", body("u-3", true)).await.code(), 0);
    assert_eq!(api.sent(), 2);
}
