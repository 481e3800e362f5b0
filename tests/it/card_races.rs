//! Card updates racing a press. While Feishu is answering a press on a card, it refuses
//! every update of that card (200810); the bridge's final update — the "Stopped." card
//! of a stopped turn, or a finished answer — must still land once the press is over, so
//! no card keeps a live Stop button after its turn ended. The presses are signed
//! callbacks to the real endpoint; the fake refuses updates while each is in flight.

use std::sync::atomic::Ordering;

use crate::{
    both_backends,
    support::{
        TestApp, TestDb,
        cards::{button_actions, press_in_interaction, press_request, streaming, until},
        config,
        fake_feishu::FakeFeishu,
        fake_openai::FakeOpenAi,
        feishu::Msg,
    },
};

/// The first operation of a CardKit card's final update: streaming turned off.
const SETTINGS: &str = "PATCH /open-apis/cardkit/v1/cards/{card_id}/settings";
/// A card posted as a message is updated with PATCH, intermediate and final alike.
const PATCH: &str = "PATCH /open-apis/im/v1/messages/{message_id}";

/// A planner streaming into a card (CardKit, or PATCH when `cardkit` is false) whose
/// model has said "Working" and is held there: the app, the turn id and the card's
/// message.
async fn running(
    db: &TestDb,
    fake: &FakeFeishu,
    llm: &FakeOpenAi,
    cardkit: bool,
) -> (TestApp, String, String) {
    fake.state.cardkit_refused.store(!cardkit, Ordering::SeqCst);
    llm.hold_after(1);
    let allow = "allow_users = [\"ou_alice\"]";
    let mut app = TestApp::spawn(config(&streaming(db, fake, llm, allow))).await;
    let ask = Msg::group("om_a", "task a").at_bot().in_thread("om_root_a");
    app.route(&ask).await;
    llm.requests(1).await;
    until(fake, || !fake.state.sent.lock().expect("lock").is_empty()).await;
    let turn = app.turn_of("om_a").await;
    let card = turn.card_message_id.clone().expect("card posted");
    assert_eq!(turn.card_id.is_some(), cardkit);
    until(fake, || {
        fake.state.shown_text(&card).as_deref() == Some("Working")
    })
    .await;
    (app, turn.turn_id, card)
}

async fn stop_race(db: TestDb, cardkit: bool) {
    let fake = FakeFeishu::planner().await;
    let llm = FakeOpenAi::start(vec!["Working".into(), " on it".into()]).await;
    let (app, turn_id, card) = running(&db, &fake, &llm, cardkit).await;
    let final_update = if cardkit { SETTINGS } else { PATCH };

    // Feishu is still handling the answer to the press when the bridge's final update
    // comes, and refuses it; it takes updates again only after refusing it twice, so a
    // bridge that did not try again would leave the card running.
    let req = press_request("ev-stop-race", "ou_alice", "stop", &turn_id, &card);
    let answered = press_in_interaction(&app, &fake, &card, &req, async {
        until(&fake, || {
            fake.state.refused_in_interaction(final_update) >= 2
        })
        .await;
    })
    .await;
    assert_eq!(
        answered.json["toast"]["type"], "success",
        "{}",
        answered.text
    );
    let row = app.turn_ended("om_a").await;
    assert_eq!(
        (row.state.as_str(), row.error.as_deref()),
        ("cancelled", Some("stopped by the user"))
    );

    until(&fake, || {
        fake.state
            .shown_card(&card)
            .is_some_and(|c| button_actions(&c) == ["new_session"])
    })
    .await;
    let shown = fake.state.shown_card(&card).expect("a card");
    assert!(shown.to_string().contains("Stopped."), "{shown}");
    assert_eq!(fake.state.shown_text(&card).as_deref(), Some("Working"));
    if cardkit {
        assert_eq!(shown["config"]["streaming_mode"], false);
    }
    assert!(fake.state.refused_in_interaction(final_update) >= 2);
    app.stop().await.expect("clean stop");
}

async fn stop_race_cardkit(db: TestDb) {
    stop_race(db, true).await;
}
both_backends!(
    a_stop_racing_its_own_press_still_ends_the_cardkit_card_stopped,
    stop_race_cardkit
);

async fn stop_race_message(db: TestDb) {
    stop_race(db, false).await;
}
both_backends!(
    a_stop_racing_its_own_press_still_ends_the_message_card_stopped,
    stop_race_message
);

async fn answer_race(db: TestDb) {
    let fake = FakeFeishu::planner().await;
    let llm = FakeOpenAi::start(vec!["Working".into(), " on it".into()]).await;
    let (app, turn_id, card) = running(&db, &fake, &llm, true).await;

    // Someone else presses Stop (refused: only alice may); while Feishu handles that
    // press, the model finishes and the bridge finishes the card.
    let req = press_request("ev-other-press", "ou_mallory", "stop", &turn_id, &card);
    let answered = press_in_interaction(&app, &fake, &card, &req, async {
        llm.release();
        until(&fake, || fake.state.refused_in_interaction(SETTINGS) >= 2).await;
    })
    .await;
    assert_eq!(answered.json["toast"]["type"], "error", "{}", answered.text);
    let row = app.turn_ended("om_a").await;
    assert_eq!(row.state, "succeeded", "{:?}", row.error);
    assert_eq!(row.reply_message_id.as_deref(), Some(card.as_str()));

    let shown = fake.state.shown_card(&card).expect("a card");
    assert_eq!(button_actions(&shown), ["new_session"], "{shown}");
    assert_eq!(shown["config"]["streaming_mode"], false);
    assert_eq!(
        fake.state.shown_text(&card).as_deref(),
        Some("Working on it")
    );
    assert_eq!(
        fake.state.sent.lock().expect("lock").len(),
        1,
        "the answer is in its card, not sent again as text"
    );
    app.stop().await.expect("clean stop");
}
both_backends!(
    a_final_answer_racing_a_press_lands_once_the_press_is_answered,
    answer_race
);
