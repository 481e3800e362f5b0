//! A token endpoint that fails while answers are pending: around the refresh point the
//! cached token serves until it expires; past its expiry, the calls and then the turn
//! wait for a token, and every answer is delivered, once.

use std::{sync::Arc, time::Duration};

use feishu_bridge::{
    feishu_api::REFRESH_RETRY,
    util::{ManualClock, UnixMs},
};

use crate::{
    both_backends,
    support::{
        TestApp, TestDb, config, config_toml,
        fake_feishu::{FakeFeishu, TokenFault},
        feishu::Msg,
    },
};

async fn token_outage(db: TestDb) {
    let fake = FakeFeishu::planner().await;
    let clock = Arc::new(ManualClock::at(UnixMs::now()));
    let text = config_toml(&db, &fake.profile_keys());
    let mut app = TestApp::spawn_with_clock(config(&text), clock.clone()).await;
    let tokens = &fake.state.tokens;
    let ask = |id: &str| Msg::dm(id, "a question");
    let move_both = |by: Duration| {
        clock.advance(by);
        tokens.advance(by);
    };

    assert_eq!(app.ask(&ask("om_1")).await, "answered");
    assert_eq!(tokens.current().as_deref(), Some("t-fake-1"));

    // Five minutes before the token expires, the endpoint fails three times: each
    // refresh fails, and the token at hand carries every answer.
    move_both(Duration::from_secs(6_900));
    tokens.fail_next(&[TokenFault::BadGateway, TokenFault::Cut, TokenFault::Code(1)]);
    for id in ["om_2", "om_3", "om_4"] {
        assert_eq!(app.ask(&ask(id)).await, "answered", "{id}");
        move_both(REFRESH_RETRY);
    }
    assert_eq!(
        tokens.faults_left(),
        0,
        "every refresh was tried and failed"
    );
    // The endpoint is back: the next refresh gets a new token (less than thirty
    // minutes were left), and the old one stayed valid meanwhile.
    assert_eq!(app.ask(&ask("om_5")).await, "answered");
    assert_eq!(tokens.current().as_deref(), Some("t-fake-2"));

    // Long past every token's expiry, the endpoint fails more often than one call
    // retries: the stored answer waits for a token instead of being given up.
    move_both(Duration::from_secs(3 * 3_600));
    let faults = [TokenFault::BadGateway, TokenFault::Code(1), TokenFault::Cut];
    tokens.fail_next(&faults.repeat(2)[..6]);
    let failed_before = tokens.failed.load(std::sync::atomic::Ordering::SeqCst);
    assert_eq!(app.ask(&ask("om_6")).await, "answered");
    assert_eq!(
        tokens.failed.load(std::sync::atomic::Ordering::SeqCst) - failed_before,
        6,
        "more failures than one call's retries"
    );

    for id in ["om_1", "om_2", "om_3", "om_4", "om_5", "om_6"] {
        let replies = fake.state.replies_to(id);
        assert_eq!(replies.len(), 1, "{id}: {replies:?}");
        assert!(
            replies[0].contains("planner received a request"),
            "{replies:?}"
        );
        assert_eq!(app.turn_of(id).await.state, "succeeded", "{id}");
    }
    app.stop().await.expect("clean stop");
}
both_backends!(
    every_answer_is_delivered_once_through_a_token_outage,
    token_outage
);
