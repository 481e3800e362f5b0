//! A streaming answer that outlives CardKit's streaming window. Feishu closes a card's
//! streaming mode ten minutes after it was turned on and refuses the text streamed
//! after that (200850); the bridge turns streaming on again and the card keeps showing
//! the answer as it grows. The fake's window is short and its clock is moved past it by
//! the test, between two pieces of the model's answer: no waiting, no sleeps.

use std::time::Duration;

use crate::{
    both_backends,
    support::{
        TestApp, TestDb,
        cards::{button_actions, streaming, until},
        config,
        fake_feishu::{CardOp, FakeFeishu},
        fake_openai::FakeOpenAi,
        feishu::Msg,
    },
};

/// The fake's streaming window in these tests (Feishu's is ten minutes).
const WINDOW: Duration = Duration::from_secs(5);

/// The position of the first operation in `ops` after `from` that `wanted` accepts.
fn after(ops: &[CardOp], from: usize, wanted: impl Fn(&CardOp) -> bool) -> Option<usize> {
    ops.iter()
        .enumerate()
        .skip(from + 1)
        .find(|(_, op)| wanted(op))
        .map(|(i, _)| i)
}

async fn past_the_window(db: TestDb) {
    let fake = FakeFeishu::planner().await;
    fake.state.set_streaming_window(WINDOW);
    let llm = FakeOpenAi::start(vec!["第一段".into(), "，第二段".into(), "，完。".into()]).await;
    llm.step();
    let mut app = TestApp::spawn(config(&streaming(&db, &fake, &llm, ""))).await;
    let ask = Msg::group("om_q", "a long task")
        .at_bot()
        .in_thread("om_root");
    app.route(&ask).await;

    llm.release();
    until(&fake, || {
        fake.state.shown_text("om_bot_reply_1").as_deref() == Some("第一段")
    })
    .await;
    let card_id = fake.state.entity_of("om_bot_reply_1").expect("an entity");

    // The window passes while the model works on; its next piece still shows, while the
    // turn is running.
    fake.state.advance_clock(WINDOW + Duration::from_secs(1));
    llm.release();
    until(&fake, || {
        fake.state.entity_text(&card_id).as_deref() == Some("第一段，第二段")
    })
    .await;
    assert_eq!(app.turn_of("om_q").await.state, "running");
    let ops = fake.state.card_ops.lock().expect("lock").clone();
    let timed_out = ops
        .iter()
        .position(|op| op.op == "content" && op.refused == Some(200850))
        .expect("the fake refused text past the window");
    let resumed = after(&ops, timed_out, |op| {
        op.op == "settings" && op.refused.is_none()
    })
    .expect("streaming was turned on again");
    after(&ops, resumed, |op| {
        op.op == "content" && op.refused.is_none()
    })
    .expect("then the text streamed on");

    // The answer finishes in the same card, whole.
    llm.release();
    let row = app.turn_ended("om_q").await;
    assert_eq!(row.state, "succeeded", "{:?}", row.error);
    assert_eq!(row.reply_message_id.as_deref(), Some("om_bot_reply_1"));
    assert_eq!(
        fake.state.entity_text(&card_id).as_deref(),
        Some("第一段，第二段，完。")
    );
    let card = fake.state.shown_card("om_bot_reply_1").expect("a card");
    assert_eq!(card["config"]["streaming_mode"], false);
    assert_eq!(button_actions(&card), ["new_session"]);
    assert_eq!(fake.state.sent.lock().expect("lock").len(), 1, "one card");
    assert!(fake.state.violations.lock().expect("lock").is_empty());
    app.stop().await.expect("clean stop");
}
both_backends!(
    a_streaming_card_keeps_showing_progress_past_feishus_streaming_window,
    past_the_window
);
