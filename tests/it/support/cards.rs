//! Card helpers shared by the card tests: a streaming planner whose answer is a card,
//! waiting on the fake Open API, and button presses as Feishu sends them.

use std::time::Duration;

use serde_json::{Value, json};

use super::{
    Answer, Request, Signer, TestApp, TestDb,
    app::{answer, config_toml},
    fake_feishu::FakeFeishu,
    fake_openai::FakeOpenAi,
    feishu::{CODER_PROFILE, TOKEN, now_secs},
    next_matching,
};

/// Feishu gives up on a card callback after 3 s, so the test client does too.
pub const FEISHU_PATIENCE: Duration = Duration::from_secs(3);

/// The planner streams from `llm` and sends through `fake`; the coder is an echo bot.
pub fn streaming(db: &TestDb, fake: &FakeFeishu, llm: &FakeOpenAi, more: &str) -> String {
    config_toml(
        db,
        &format!(
            "{}{more}\n\
             [profiles.agent]\nkind = \"openai\"\nbase_url = \"{}\"\nmodel = \"test-model\"\n\
             stream = true\nstream_interval_ms = 200\n\
             {CODER_PROFILE}\n[context]\nshared_thread_enabled = true\n",
            fake.profile_keys(),
            llm.base
        ),
    )
}

/// The `action` of every button of `card`, at any depth, in order.
pub fn button_actions(card: &Value) -> Vec<String> {
    match card {
        Value::Object(m) => {
            let own = (m.get("tag").and_then(Value::as_str) == Some("button"))
                .then(|| m["behaviors"][0]["value"]["action"].as_str().unwrap_or(""));
            own.map(str::to_string)
                .into_iter()
                .chain(m.values().flat_map(button_actions))
                .collect()
        }
        Value::Array(a) => a.iter().flat_map(button_actions).collect(),
        _ => Vec::new(),
    }
}

/// Waits until the fake's activity satisfies `done`.
pub async fn until(fake: &FakeFeishu, mut done: impl FnMut() -> bool) {
    let mut seen = fake.state.activity.subscribe();
    if !done() {
        next_matching(&mut seen, "the fake's activity", |_| done()).await;
    }
}

/// The signed, encrypted `card.action.trigger` callback of `operator` pressing the
/// `action` button of `turn_id`'s card, with event id `event_id`.
pub fn press_request(
    event_id: &str,
    operator: &str,
    action: &str,
    turn_id: &str,
    card: &str,
) -> Request {
    let value = json!({"action": action, "turn_id": turn_id});
    press_value_request(event_id, operator, value, card)
}

/// The signed, encrypted `card.action.trigger` callback of `operator` pressing a button
/// of `card` whose value is `value`, with event id `event_id`.
pub fn press_value_request(event_id: &str, operator: &str, value: Value, card: &str) -> Request {
    let event = json!({
        "operator": {"open_id": operator, "tenant_key": "tenant_test"},
        "token": "c-delayed-update-token",
        "action": {"value": value, "tag": "button"},
        "host": "im_message",
        "context": {"open_message_id": card, "open_chat_id": "oc_group"},
    });
    let signer = Signer::default();
    signer.request(&signer.envelope(event_id, "card.action.trigger", event))
}

/// Posts `req` to the planner's `/webhook/planner/{kind}` with Feishu's patience.
pub async fn post_within_3s(app: &TestApp, kind: &str, req: &Request) -> Answer {
    let r = req.apply(
        app.client
            .post(format!("{}/webhook/planner/{kind}", app.base))
            .timeout(FEISHU_PATIENCE),
    );
    answer(r.send().await.expect("answered within Feishu's 3 s")).await
}

/// A press as Feishu makes it on a real tenant: the card of `card_message` is in an
/// interaction (the fake refuses its updates with 200810) from just before the signed
/// callback `req` is posted to the event URL until Feishu has handled the bridge's
/// answer. `handling` is that handling: a test makes it last until what it wants to see
/// has happened (an update refused meanwhile), which makes the race it tests certain.
pub async fn press_in_interaction(
    app: &TestApp,
    fake: &FakeFeishu,
    card_message: &str,
    req: &Request,
    handling: impl Future<Output = ()>,
) -> Answer {
    let interaction = fake.state.interaction(card_message);
    let answered = post_within_3s(app, "event", req).await;
    handling.await;
    drop(interaction);
    answered
}

/// Presses a card button as `operator` (a signed `card.action.trigger` callback on the
/// event URL).
pub async fn press(
    app: &TestApp,
    operator: &str,
    action: &str,
    turn_id: &str,
    card: &str,
) -> Answer {
    let id = format!("ev-card-{}", rand::random::<u64>());
    let req = press_request(&id, operator, action, turn_id, card);
    post_within_3s(app, "event", &req).await
}

/// Presses a button through the legacy message-card URL (plaintext, SHA-1 signed).
pub async fn press_legacy(app: &TestApp, operator: &str, action: &str, turn_id: &str) -> Answer {
    use sha1::{Digest, Sha1};
    let body = json!({
        "open_id": operator, "open_message_id": "om_card", "open_chat_id": "oc_group",
        "tenant_key": "tenant_test", "token": "c-legacy",
        "action": {"value": {"action": action, "turn_id": turn_id}, "tag": "button"},
    })
    .to_string();
    let (ts, nonce) = (now_secs().to_string(), "n-legacy");
    let mut h = Sha1::new();
    h.update(format!("{ts}{nonce}{TOKEN}").as_bytes());
    h.update(body.as_bytes());
    let req = Request {
        body,
        headers: vec![
            ("x-lark-request-timestamp".into(), ts),
            ("x-lark-request-nonce".into(), nonce.into()),
            ("x-lark-signature".into(), hex::encode(h.finalize())),
        ],
    };
    post_within_3s(app, "card", &req).await
}
