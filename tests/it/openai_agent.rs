//! The `openai` backend against a fake OpenAI-compatible server over real HTTP.

use std::time::Duration;

use std::error::Error as _;

use feishu_bridge::agent::{
    Agent, AgentError, AgentTurn, OpenAiAgent, PastTurn, Progress, TurnSender,
};
use secrecy::SecretString;
use serde_json::json;
use tokio::sync::watch;

use crate::support::fake_openai::FakeOpenAi;

const KEY: &str = "sk-test-do-not-leak-7f3a";

/// Long enough never to fire in a passing test; only a hung one hits it.
const GUARD: Duration = Duration::from_secs(20);

fn chunks(pieces: &[&str]) -> Vec<String> {
    pieces.iter().map(|p| p.to_string()).collect()
}

fn agent(fake: &FakeOpenAi, key: Option<&str>, stream: bool) -> OpenAiAgent {
    OpenAiAgent {
        http: reqwest::Client::new(),
        // A trailing slash, as an operator may well write it.
        base_url: format!("{}/", fake.base),
        model: "test-model".into(),
        api_key: key.map(SecretString::from),
        timeout: Duration::from_secs(30),
        stream,
        show_thinking: false,
    }
}

fn turn(prompt: &str, earlier: &[(&str, &str)]) -> AgentTurn {
    AgentTurn {
        kind: "turn",
        turn_id: "turn-1".into(),
        profile: "planner".into(),
        session_key: "p2p:ou_1".into(),
        session_id: "sess-1".into(),
        chat_id: "oc_1".into(),
        chat_type: "p2p".into(),
        root_msg_id: "om_1".into(),
        message_id: "om_1".into(),
        sender: TurnSender {
            open_id: "ou_1".into(),
            name: None,
        },
        request_text: "the request".into(),
        prompt: prompt.into(),
        context_items: Vec::new(),
        topic_root: false,
        quoted: false,
        history: 0,
        feed_segment_ids: Vec::new(),
        feed: Vec::new(),
        earlier: earlier
            .iter()
            .map(|(request, output)| PastTurn {
                feed: Vec::new(),
                request: request.to_string(),
                output: output.to_string(),
            })
            .collect(),
        handoff_peers: Vec::new(),
        media: Vec::new(),
        images: Vec::new(),
    }
}

fn partial() -> (watch::Sender<Progress>, watch::Receiver<Progress>) {
    watch::channel(Progress::default())
}

#[tokio::test]
async fn earlier_turns_become_messages_before_the_prompt() {
    let fake = FakeOpenAi::start(chunks(&["The ", "answer."])).await;
    let agent = agent(&fake, None, false);
    assert!(!agent.streams());
    let (tx, rx) = partial();
    let t = turn(
        "PROMPT with context",
        &[("first q", "first a"), ("second q", "second a")],
    );
    let answer = agent.run(&t, &tx).await.expect("answer");
    assert_eq!(answer.text, "The answer.");
    assert_eq!(answer.handoff, None);
    assert!(
        rx.borrow().is_empty(),
        "a non-streamed answer publishes nothing"
    );

    let seen = fake.requests(1).await;
    assert_eq!(seen.len(), 1);
    let body = &seen[0].body;
    assert_eq!(body["model"], "test-model");
    assert_eq!(body["stream"], false);
    assert_eq!(
        body["messages"],
        json!([
            {"role": "user", "content": "first q"},
            {"role": "assistant", "content": "first a"},
            {"role": "user", "content": "second q"},
            {"role": "assistant", "content": "second a"},
            {"role": "user", "content": "PROMPT with context"},
        ])
    );
}

#[tokio::test]
async fn the_bearer_key_is_sent_only_when_set() {
    let fake = FakeOpenAi::start(chunks(&["ok"])).await;
    let (tx, _rx) = partial();
    agent(&fake, Some(KEY), false)
        .run(&turn("p", &[]), &tx)
        .await
        .expect("with key");
    agent(&fake, None, false)
        .run(&turn("p", &[]), &tx)
        .await
        .expect("without key");
    agent(&fake, Some(""), true)
        .run(&turn("p", &[]), &tx)
        .await
        .expect("with an empty key");
    let seen = fake.requests(3).await;
    assert_eq!(
        seen[0].authorization.as_deref(),
        Some(format!("Bearer {KEY}").as_str())
    );
    assert_eq!(seen[1].authorization, None);
    assert_eq!(seen[2].authorization, None);
    assert_eq!(
        seen[2].body["messages"],
        json!([{"role": "user", "content": "p"}])
    );
}

#[tokio::test]
async fn a_stream_publishes_the_growing_text_in_order() {
    let pieces = ["Hel", "lo, ", "wörld ", "你好", "!"];
    let fake = FakeOpenAi::start(chunks(&pieces)).await;
    // Every chunk waits for a release, so each published value can be seen.
    fake.step();
    let agent = agent(&fake, Some(KEY), true);
    assert!(agent.streams());
    let (tx, mut rx) = partial();
    let t = turn("tell me", &[]);
    let run = agent.run(&t, &tx);
    let watch = async {
        let mut seen = Vec::new();
        for _ in pieces {
            fake.release();
            rx.changed().await.expect("the agent holds the sender");
            seen.push(rx.borrow_and_update().text.clone());
        }
        seen
    };
    let (answer, seen) = tokio::time::timeout(GUARD, async { tokio::join!(run, watch) })
        .await
        .expect("each chunk is published as it arrives");
    assert_eq!(answer.expect("streamed answer").text, "Hello, wörld 你好!");
    assert_eq!(
        seen,
        vec![
            "Hel",
            "Hello, ",
            "Hello, wörld ",
            "Hello, wörld 你好",
            "Hello, wörld 你好!"
        ]
    );
    assert_eq!(fake.requests(1).await[0].body["stream"], true);
    assert!(!fake.is_client_gone(), "the stream was read to [DONE]");
}

#[tokio::test]
async fn an_unstepped_stream_still_grows_monotonically() {
    let pieces = ["a", "bb", "ccc", "dddd"];
    let fake = FakeOpenAi::start(chunks(&pieces)).await;
    let agent = agent(&fake, None, true);
    let (tx, mut rx) = partial();
    let t = turn("p", &[]);
    let run = async {
        let answer = agent.run(&t, &tx).await;
        drop(tx);
        answer
    };
    let watch = async {
        let mut seen = Vec::new();
        while rx.changed().await.is_ok() {
            seen.push(rx.borrow_and_update().text.clone());
        }
        seen
    };
    let (answer, seen) = tokio::join!(run, watch);
    let answer = answer.expect("answer").text;
    assert_eq!(answer, "abbcccdddd");
    // The watch keeps only the latest value, so some may be skipped, but never reordered.
    assert_eq!(seen.last(), Some(&answer));
    for pair in seen.windows(2) {
        assert!(pair[1].starts_with(&pair[0]) && pair[1].len() > pair[0].len());
    }
}

#[tokio::test]
async fn an_error_status_is_named_and_the_key_never_shows() {
    let fake = FakeOpenAi::start(chunks(&["unused"])).await;
    // A server that echoes the key back in its error message.
    fake.fail_with(
        401,
        &format!(
            r#"{{"error":{{"message":"Incorrect API key provided: {KEY}.","type":"invalid_request_error"}}}}"#
        ),
    );
    let (tx, _rx) = partial();
    for stream in [false, true] {
        let agent = agent(&fake, Some(KEY), stream);
        let err = agent.run(&turn("p", &[]), &tx).await.expect_err("401");
        assert!(
            matches!(&err, AgentError::Status { status, detail: Some(_) } if status.as_u16() == 401),
            "{err:?}"
        );
        let text = err.to_string();
        assert!(text.contains("401"), "{text}");
        assert!(text.contains("Incorrect API key provided"), "{text}");
        assert!(!text.contains(KEY), "the key leaked: {text}");
        assert!(!format!("{err:?}").contains(KEY));
        assert!(!format!("{agent:?}").contains(KEY));
    }

    let long = "x".repeat(5000);
    fake.fail_with(503, &format!("upstream down {long}"));
    let err = agent(&fake, None, true)
        .run(&turn("p", &[]), &tx)
        .await
        .expect_err("503");
    assert!(
        matches!(&err, AgentError::Status { status, .. } if status.as_u16() == 503),
        "{err:?}"
    );
    let text = err.to_string();
    assert!(text.contains("503"), "{text}");
    assert!(text.contains("upstream down"), "{text}");
    assert!(text.len() < 400, "the body is cut: {} chars", text.len());
}

#[tokio::test]
async fn an_empty_stream_is_an_error() {
    let fake = FakeOpenAi::start(Vec::new()).await;
    let (tx, _rx) = partial();
    let err = agent(&fake, None, true)
        .run(&turn("p", &[]), &tx)
        .await
        .expect_err("nothing to say");
    assert!(matches!(err, AgentError::EmptyStream), "{err:?}");
    assert!(err.to_string().contains("empty"), "{err}");
    let err = agent(&fake, None, false)
        .run(&turn("p", &[]), &tx)
        .await
        .expect_err("nothing to say");
    assert!(matches!(err, AgentError::EmptyAnswer), "{err:?}");
    assert!(err.to_string().contains("empty"), "{err}");
}

#[tokio::test]
async fn an_unreachable_server_is_reported_without_its_url() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().expect("addr");
    drop(listener);
    let agent = OpenAiAgent {
        http: reqwest::Client::new(),
        base_url: format!("http://{addr}/v1"),
        model: "m".into(),
        api_key: Some(SecretString::from(KEY)),
        timeout: Duration::from_secs(30),
        stream: true,
        show_thinking: false,
    };
    let (tx, _rx) = partial();
    let err = agent
        .run(&turn("p", &[]), &tx)
        .await
        .expect_err("nobody listens");
    assert!(matches!(err, AgentError::Unreachable(_)), "{err:?}");
    let cause = err
        .source()
        .expect("the transport error is kept as the cause");
    let cause = cause
        .downcast_ref::<reqwest::Error>()
        .expect("a reqwest error");
    assert!(cause.is_connect() && cause.url().is_none(), "{cause:?}");
    let text = err.to_string();
    assert!(
        text.starts_with("agent failed: agent unreachable: "),
        "{text}"
    );
    assert!(!text.contains(&addr.to_string()), "{text}");
    // `Debug` may show the socket address the connection went to, never the URL.
    let debug = format!("{err:?}");
    assert!(!debug.contains("http://"), "{debug}");
    for shown in [text, debug] {
        assert!(!shown.contains(KEY), "{shown}");
    }
}

#[tokio::test]
async fn dropping_a_running_turn_closes_the_stream() {
    let fake = FakeOpenAi::start(chunks(&["first ", "second"])).await;
    fake.hold_after(1);
    let agent = agent(&fake, None, true);
    let (tx, mut rx) = partial();
    let t = turn("p", &[]);
    let first = tokio::time::timeout(GUARD, async {
        tokio::select! {
            result = agent.run(&t, &tx) => panic!("the held stream finished: {result:?}"),
            changed = rx.changed() => {
                changed.expect("the agent holds the sender");
                assert!(!fake.is_client_gone(), "the client is still reading");
                rx.borrow().text.clone()
            }
        }
    })
    .await
    .expect("the first chunk is published before the hold");
    assert_eq!(first, "first ");
    // The run future is dropped here, mid-stream.
    tokio::time::timeout(GUARD, fake.client_gone())
        .await
        .expect("the fake saw the client go away");
}

#[tokio::test]
async fn a_turn_past_its_timeout_fails_and_lets_go() {
    let fake = FakeOpenAi::start(chunks(&["never"])).await;
    fake.hold_after(0);
    let mut agent = agent(&fake, None, true);
    agent.timeout = Duration::from_millis(300);
    let (tx, _rx) = partial();
    let err = agent
        .run(&turn("p", &[]), &tx)
        .await
        .expect_err("held past the timeout");
    assert!(
        matches!(err, AgentError::Timeout(d) if d == Duration::from_millis(300)),
        "{err:?}"
    );
    assert_eq!(err.to_string(), "agent failed: no answer within 300 ms");
    tokio::time::timeout(GUARD, fake.client_gone())
        .await
        .expect("the request was abandoned");
}
