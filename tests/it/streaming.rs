//! Streaming answers against a fake Open API that keeps the real tenant's limits:
//! CardKit entities with strictly increasing sequences and 10 operations per second per
//! card, 5 updates per second per message, 50 calls per second per app, 30 KB cards,
//! rate-limit storms, chats without thread replies, and mention tags that would ping.

use std::sync::atomic::Ordering;

use serde_json::Value;

use crate::both_backends;
use crate::support::{
    TestApp, TestDb, config, config_toml,
    fake_feishu::{FakeFeishu, Refusal, Storm},
    fake_openai::FakeOpenAi,
    feishu::Msg,
    next_matching,
};

/// The planner streams from `llm` and sends through `fake`.
fn streaming(db: &TestDb, fake: &FakeFeishu, llm: &FakeOpenAi) -> String {
    config_toml(
        db,
        &format!(
            "{}\n[profiles.agent]\nkind = \"openai\"\nbase_url = \"{}\"\nmodel = \"m\"\n\
             stream = true\nstream_interval_ms = 200\n\
             [context]\nmax_agent_output_chars = 200000\n",
            fake.profile_keys(),
            llm.base
        ),
    )
}

/// Waits until the fake's activity satisfies `done`.
async fn until(fake: &FakeFeishu, what: &str, mut done: impl FnMut() -> bool) {
    let mut seen = fake.state.activity.subscribe();
    if !done() {
        next_matching(&mut seen, what, |_| done()).await;
    }
}

/// The values of a card's buttons.
fn buttons(card: &Value) -> Vec<String> {
    let mut out = Vec::new();
    collect_buttons(card, &mut out);
    out
}

fn collect_buttons(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::Object(m) => {
            if m.get("tag").and_then(Value::as_str) == Some("button") {
                let action = &m["behaviors"][0]["value"]["action"];
                out.push(action.as_str().unwrap_or_default().to_string());
            }
            m.values().for_each(|x| collect_buttons(x, out));
        }
        Value::Array(a) => a.iter().for_each(|x| collect_buttons(x, out)),
        _ => {}
    }
}

/// The markdown of a plain card posted as a message's content.
fn card_markdown(body: &Value) -> String {
    let card: Value =
        serde_json::from_str(body["content"].as_str().unwrap_or_default()).unwrap_or_default();
    card["body"]["elements"][0]["content"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

/// A long Chinese answer in markdown, in pieces as a model streams them; well past one
/// card's 30 KB, with mention tags that must ping nobody.
fn long_answer() -> Vec<String> {
    let mut pieces = vec!["## 方案\n\n请 <at user_id=\"all\">所有人</at> 注意：\n\n".to_string()];
    for i in 0..300 {
        pieces.push(format!(
            "- **第{i}步**：把飞书的回调先写进收件箱，再确认；\"引号\"与`代码`都要保留，\
             不能丢失任何已经确认的事件。\n"
        ));
    }
    pieces.push("\n结束 <at id=all></at>".to_string());
    pieces
}

async fn long_chinese_answer(db: TestDb) {
    let fake = FakeFeishu::planner().await;
    let pieces = long_answer();
    let answer: String = pieces.concat();
    let llm = FakeOpenAi::start(pieces).await;
    llm.hold_after(20);
    let mut app = TestApp::spawn(config(&streaming(&db, &fake, &llm))).await;
    // This chat takes no replies in thread: the card goes to the chat as a quote.
    fake.state
        .no_thread
        .lock()
        .expect("lock")
        .insert("om_q".to_string());
    let ask = Msg::group("om_q", "write the plan")
        .at_bot()
        .in_thread("om_root");
    app.route(&ask).await;

    // The card is a CardKit entity, sent by its id; its text streams while the model
    // is held.
    until(&fake, "the card's first text", || {
        let cards = fake.state.cards.lock().expect("lock");
        cards
            .values()
            .any(|c| c.message_id.is_some() && c.last_sequence > 0)
    })
    .await;
    llm.release();
    let row = app.turn_ended("om_q").await;
    assert_eq!(row.state, "succeeded", "{:?}", row.error);
    let card_message = row.reply_message_id.clone().expect("answered in its card");
    let card_id = fake
        .state
        .entity_of(&card_message)
        .expect("sent as an entity");
    assert_eq!(row.card_id.as_deref(), Some(card_id.as_str()));

    let entity = fake.state.cards.lock().expect("lock")[&card_id]
        .card
        .clone();
    assert_eq!(
        entity["config"]["streaming_mode"], false,
        "streaming is off"
    );
    assert_eq!(buttons(&entity), ["new_session"], "no stop button is left");
    let squash = |s: &str| s.replace(['\n', '＜', '<'], "");
    let first = fake
        .state
        .entity_text(&card_id)
        .expect("the answer element");
    assert!(
        squash(&answer).starts_with(&squash(&first)),
        "the card shows the answer's beginning"
    );
    assert!(first.len() < answer.len(), "the rest continues below");

    // The rest follows as markdown cards, each a message of its own, in order.
    let sent = fake.state.sent.lock().expect("lock").clone();
    let (card_send, rest) = sent.split_first().expect("the card was sent");
    assert_eq!(card_send.1["reply_in_thread"], false);
    assert!(!rest.is_empty());
    let mut shown = first.clone();
    for (target, body) in rest {
        assert_eq!(target, "om_q");
        assert_eq!(
            body["msg_type"], "interactive",
            "continuations keep markdown"
        );
        assert_eq!(body["reply_in_thread"], false);
        shown.push('\n');
        shown.push_str(&card_markdown(body));
    }
    assert_eq!(
        squash(&shown),
        squash(&answer),
        "nothing lost, nothing doubled"
    );

    // Within every limit: no size refusal, no rate refusal, sequences strictly growing.
    // (The thread's root is unknown to the fake: reading it is refused as not found.)
    let refusals: Vec<(String, i64)> = fake
        .state
        .refusals
        .lock()
        .expect("lock")
        .iter()
        .filter(|(endpoint, _)| !endpoint.starts_with("GET "))
        .cloned()
        .collect();
    assert_eq!(
        refusals,
        [(
            "POST /open-apis/im/v1/messages/{message_id}/reply".to_string(),
            230071
        )],
        "only the thread reply was refused"
    );
    assert!(fake.state.violations.lock().expect("lock").is_empty());
    let ops = fake.state.card_ops.lock().expect("lock").clone();
    let sequences: Vec<i64> = ops
        .iter()
        .filter(|o| o.card_id == card_id)
        .filter_map(|o| o.sequence)
        .collect();
    assert!(
        sequences.len() >= 3,
        "streamed, then finished: {sequences:?}"
    );
    assert!(sequences.windows(2).all(|w| w[0] < w[1]), "{sequences:?}");
    assert!(
        ops.iter().any(|o| o.op == "content"),
        "typewriter updates through the element"
    );
    assert!(
        fake.state.notified.lock().expect("lock").is_empty(),
        "nobody was pinged"
    );
    // The whole answer is what the thread's other bots see.
    let outputs = app.planner_outputs().await;
    assert_eq!(outputs.len(), 1);
    assert_eq!(squash(&outputs[0].text), squash(&answer));
    app.stop().await.expect("clean stop");
}
both_backends!(
    a_long_chinese_answer_streams_through_cardkit_and_finishes_within_the_limits,
    long_chinese_answer
);

async fn storm(db: TestDb) {
    let fake = FakeFeishu::planner().await;
    let llm = FakeOpenAi::start(vec!["第一段".into(), "，第二段".into(), "，完。".into()]).await;
    llm.hold_after(1);
    let mut app = TestApp::spawn(config(&streaming(&db, &fake, &llm))).await;
    // Every streamed text update is refused for an hour.
    *fake.state.storm.lock().expect("lock") = Some(Storm {
        path_contains: "/elements/".into(),
        reset_secs: 3600,
    });
    let ask = Msg::group("om_q", "go").at_bot().in_thread("om_root");
    app.route(&ask).await;
    until(&fake, "a refused text update", || {
        fake.state.storm_refusals.load(Ordering::SeqCst) > 0
    })
    .await;
    llm.release();
    // The final answer is not held behind the refused updates.
    let row = app.turn_ended("om_q").await;
    assert_eq!(row.state, "succeeded", "{:?}", row.error);
    let card_id = fake
        .state
        .entity_of(row.reply_message_id.as_deref().unwrap_or_default())
        .expect("an entity");
    assert_eq!(
        fake.state.entity_text(&card_id).as_deref(),
        Some("第一段，第二段，完。")
    );
    assert_eq!(
        fake.state.storm_refusals.load(Ordering::SeqCst),
        1,
        "after a refusal the card stays quiet until the limit resets: no retries"
    );
    app.stop().await.expect("clean stop");
}
both_backends!(
    a_429_storm_during_streaming_delays_only_intermediate_updates,
    storm
);

async fn without_cardkit(db: TestDb) {
    let fake = FakeFeishu::planner().await;
    fake.state.cardkit_refused.store(true, Ordering::SeqCst);
    let llm = FakeOpenAi::start(vec!["Hello".into(), " world".into()]).await;
    llm.hold_after(1);
    let mut app = TestApp::spawn(config(&streaming(&db, &fake, &llm))).await;
    let ask = Msg::group("om_q", "hi").at_bot().in_thread("om_root");
    app.route(&ask).await;
    until(&fake, "an intermediate message update", || {
        !fake.state.patches.lock().expect("lock").is_empty()
    })
    .await;
    llm.release();
    let row = app.turn_ended("om_q").await;
    assert_eq!(row.state, "succeeded", "{:?}", row.error);
    let card_message = row.reply_message_id.clone().expect("a card");
    assert_eq!(row.card_id, None, "a card posted as a message");
    assert_eq!(
        fake.state.card_text(&card_message).as_deref(),
        Some("Hello world")
    );
    let last = fake.state.shown_card(&card_message).expect("a card");
    assert_eq!(buttons(&last), ["new_session"]);

    // The refusal is remembered: the next answer does not ask CardKit again.
    let again = Msg::group("om_q2", "again").at_bot().in_thread("om_root");
    app.route(&again).await;
    llm.release();
    assert_eq!(app.turn_ended("om_q2").await.state, "succeeded");
    let creates = fake.state.card_ops.lock().expect("lock").len();
    assert_eq!(creates, 1, "one refused create, then message updates only");
    assert!(fake.state.violations.lock().expect("lock").is_empty());
    app.stop().await.expect("clean stop");
}
both_backends!(
    a_streaming_card_falls_back_to_message_updates_when_cardkit_is_refused,
    without_cardkit
);

async fn many_streams(db: TestDb) {
    let fake = FakeFeishu::planner().await;
    let llm = FakeOpenAi::start(vec!["一".into(), "二".into(), "三".into()]).await;
    let mut app = TestApp::spawn(config(&streaming(&db, &fake, &llm))).await;
    let asks: Vec<Msg> = (0..25)
        .map(|i| {
            Msg::group(&format!("om_q{i}"), "go")
                .at_bot()
                .in_chat(&format!("oc_chat_{i}"))
        })
        .collect();
    for ask in &asks {
        app.route(ask).await;
    }
    for ask in &asks {
        let row = app.turn_ended(&ask.message_id).await;
        assert_eq!(row.state, "succeeded", "{:?}", row.error);
    }
    assert!(
        fake.state.violations.lock().expect("lock").is_empty(),
        "25 streams at once stay under the app's limits: {:?}",
        fake.state.violations.lock().expect("lock")
    );
    assert_eq!(fake.state.sent.lock().expect("lock").len(), 25);
    app.stop().await.expect("clean stop");
}
both_backends!(
    twenty_five_concurrent_streams_stay_under_the_app_rate_limit,
    many_streams
);

async fn refused_for_size(db: TestDb) {
    let fake = FakeFeishu::planner().await;
    let pieces = long_answer();
    let answer: String = pieces.concat();
    let llm = FakeOpenAi::start(pieces).await;
    let mut app = TestApp::spawn(config(&streaming(&db, &fake, &llm))).await;
    // Feishu counts the final card as too large (200860) the first time.
    fake.state.refuse_next.lock().expect("lock").push(Refusal {
        endpoint: "PUT /open-apis/cardkit/v1/cards/{card_id}".into(),
        status: 400,
        code: 200860,
    });
    let ask = Msg::group("om_q", "write the plan")
        .at_bot()
        .in_thread("om_root");
    app.route(&ask).await;
    let row = app.turn_ended("om_q").await;
    assert_eq!(row.state, "succeeded", "{:?}", row.error);
    let card_message = row.reply_message_id.clone().expect("answered in its card");
    let card_id = fake.state.entity_of(&card_message).expect("an entity");
    let updates: Vec<_> = fake
        .state
        .card_ops
        .lock()
        .expect("lock")
        .iter()
        .filter(|o| o.op == "update")
        .map(|o| o.refused)
        .collect();
    assert_eq!(
        updates,
        [Some(200860), None],
        "refused once, then made smaller"
    );

    // Finished with the text that fits and its buttons, never left running.
    let card = fake.state.cards.lock().expect("lock")[&card_id]
        .card
        .clone();
    assert_eq!(buttons(&card), ["new_session"]);
    assert_eq!(card["config"]["streaming_mode"], false);
    let first = fake.state.entity_text(&card_id).unwrap_or_default();
    let sent = fake.state.sent.lock().expect("lock").clone();
    let mut shown = first.clone();
    for (_, body) in &sent[1..] {
        shown.push_str(&card_markdown(body));
    }
    let squash = |s: &str| s.replace(['\n', '＜', '<'], "");
    assert_eq!(squash(&shown), squash(&answer), "the rest followed below");
    app.stop().await.expect("clean stop");
}
both_backends!(
    a_final_card_refused_for_its_size_is_finished_with_less_text,
    refused_for_size
);
