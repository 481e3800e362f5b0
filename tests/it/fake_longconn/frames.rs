//! Frames on an open connection: ping/pong, pushes and their ACKs, the conformance
//! checks, close and silence; and the payload builders.

use base64::{Engine, engine::general_purpose::STANDARD};
use futures_util::{FutureExt, SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::{Message, protocol::frame::coding::CloseCode};

use super::{Client, url};
use crate::support::{
    fake_feishu::FakeFeishu,
    fake_longconn::{
        Ack, CARD_MESSAGE_ID, ClientConfigJson, Frame, Order, Phase, Push, card_action,
        event_payload, message_event, without_token,
    },
    feishu::{BOT_OPEN_ID, Msg, TOKEN},
};

#[tokio::test]
async fn pings_are_answered_with_the_client_config() {
    let (fake, lc) = FakeFeishu::planner_with_long_connection().await;
    let mut c = Client::dial(&url(&fake).await).await.expect("upgraded");
    c.ping().await;
    lc.connected(1).await;
    let pong = c.next_frame().await;
    assert_eq!(
        (pong.method, pong.service, pong.header("type")),
        (0, 42, Some("pong"))
    );
    let config: Value =
        serde_json::from_slice(pong.payload.as_deref().expect("payload")).expect("JSON");
    let want = json!({"ReconnectCount": -1, "ReconnectInterval": 1, "ReconnectNonce": 0, "PingInterval": 1});
    assert_eq!(config, want);
    lc.set_config(ClientConfigJson {
        reconnect_count: 3,
        reconnect_interval: 5,
        reconnect_nonce: 2,
        ping_interval: 9,
    });
    c.ping().await;
    let pong = c.next_frame().await;
    let config: Value =
        serde_json::from_slice(pong.payload.as_deref().expect("payload")).expect("JSON");
    let want = json!({"ReconnectCount": 3, "ReconnectInterval": 5, "ReconnectNonce": 2, "PingInterval": 9});
    assert_eq!(config, want);
    let stats = lc.stats();
    assert_eq!(
        (stats.pings, stats.frames_in, stats.frames_out),
        (vec![2], 2, 2)
    );
    assert_eq!(stats.phases, [Phase::Open]);
    assert_eq!(lc.violations(), Vec::<String>::new());
}

#[tokio::test]
async fn fragments_sent_in_reverse_arrive_as_parts_of_one_message() {
    let (fake, lc) = FakeFeishu::planner_with_long_connection().await;
    let mut c = Client::connected(&fake).await;
    // Chinese text, so some fragment boundaries fall inside a UTF-8 character.
    let payload = message_event("ev-1", "om_1", "oc_group", "帮我总结一下这个讨论串", true);
    let push = Push::event(payload.clone())
        .fragments(3)
        .reversed()
        .message_id("m-frag");
    let last = lc.push_no_wait(push).await;
    let mut parts = Vec::new();
    for _ in 0..3 {
        parts.push(c.next_frame().await);
    }
    let seqs: Vec<_> = parts
        .iter()
        .map(|f| f.header("seq").expect("seq"))
        .collect();
    assert_eq!(seqs, ["2", "1", "0"]);
    for f in &parts {
        assert_eq!((f.method, f.service), (1, 42));
        let h = |k| f.header(k).expect(k);
        assert_eq!(
            (h("type"), h("message_id"), h("sum")),
            ("event", "m-frag", "3")
        );
        assert_eq!(
            h("trace_id"),
            parts[0].header("trace_id").expect("trace_id")
        );
        assert!(f.log_id > u64::from(u32::MAX), "LogIDs use all 64 bits");
    }
    assert!(parts.windows(2).all(|w| w[0].seq_id < w[1].seq_id));
    assert_eq!(parts[2].seq_id, last);
    let mut joined: Vec<u8> = Vec::new();
    for f in parts.iter().rev() {
        joined.extend(f.payload.as_deref().expect("payload"));
    }
    assert_eq!(joined, payload);
    c.ack(&parts[2], &json!({"code": 200})).await;
    let ack: Ack = lc.ack(last).await.expect("acknowledged");
    assert_eq!((ack.code, ack.data, ack.connection), (200, None, 1));
    assert_eq!(lc.violations(), Vec::<String>::new());
}

#[tokio::test]
async fn an_ack_is_matched_and_parsed() {
    let (fake, lc) = FakeFeishu::planner_with_long_connection().await;
    let mut c = Client::connected(&fake).await;
    let press = card_action("ev-card", json!({"action": "stop"}), "ou_alice", "oc_group");
    let toast = json!({"toast": {"type": "info", "content": "stopped"}});
    let data = STANDARD.encode(toast.to_string());
    let reply = json!({"code": 200, "headers": null, "data": data});
    let (ack, pushed) = tokio::join!(lc.push(Push::card(press)), async {
        let f = c.next_frame().await;
        c.ack(&f, &reply).await;
        f
    });
    assert_eq!((ack.seq_id, ack.log_id), (pushed.seq_id, pushed.log_id));
    assert_eq!((ack.service, ack.method, ack.code), (42, 1, 200));
    assert_eq!(ack.data, Some(toast));
    assert_eq!(ack.header("type"), Some("card"));
    assert_eq!(ack.header("biz_rt"), Some("3"));
    assert_eq!(ack.headers.len(), pushed.headers.len() + 1);
    assert_eq!(ack.raw_payload, reply.to_string().into_bytes());
    assert_eq!(lc.stats().acks, 1);
    assert_eq!(lc.violations(), Vec::<String>::new());
    // A second ACK for the same message is one too many (§5).
    c.ack(&pushed, &json!({"code": 200})).await;
    lc.violation("a second ACK for message lc-msg-1").await;
}

#[tokio::test]
async fn sloppy_frames_and_acks_are_violations() {
    let (fake, lc) = FakeFeishu::planner_with_long_connection().await;
    let mut c = Client::connected(&fake).await;
    c.ws.send(Message::Text("ping".into())).await.expect("sent");
    lc.violation("conn 1: a text message").await;
    c.send(&Frame::new(3, 0, 7, 0, &[("type", "ping")])).await;
    lc.violation("ping with service 7 (the URL's service_id is 42), SeqID 3")
        .await;
    c.send_raw(vec![0x08, 0, 0x10, 0, 0x18, 42]).await;
    lc.violation("required Frame.method missing").await;
    c.send(&Frame::new(999, 0, 42, 1, &[])).await;
    lc.violation("SeqID 999, which was never pushed").await;
    // Fragments 1 and 0 of three, then an ACK that drops a header, sends no biz_rt and
    // a `data` that is not base64.
    let incomplete = Push::event(b"{\"a\":1}".to_vec())
        .fragments(3)
        .order(vec![1, 0, 2])
        .only_first(2);
    assert_eq!(incomplete.order, Order::Given(vec![1, 0, 2]));
    let seq = lc.push_no_wait(incomplete).await;
    c.next_data().await;
    let mut f = c.next_data().await;
    assert_eq!(f.seq_id, seq);
    f.headers.retain(|h| h.key != "trace_id");
    f.payload = Some(br#"{"code":200,"data":"not base64!"}"#.to_vec());
    c.send(&f).await;
    for part in [
        "trace_id=lc-trace-1 not echoed",
        "0 biz_rt headers",
        "whose fragments never all came",
        "data is not base64 of JSON",
    ] {
        lc.violation(part).await;
    }
}

#[tokio::test]
async fn close_sends_a_normal_close_frame_after_what_was_queued() {
    let (fake, lc) = FakeFeishu::planner_with_long_connection().await;
    let mut c = Client::connected(&fake).await;
    let unacked = lc.push_no_wait(Push::event(b"{}".to_vec())).await;
    lc.close();
    assert_eq!(c.next_frame().await.seq_id, unacked);
    let Message::Close(Some(close)) = c.next_message().await else {
        panic!("expected a close frame");
    };
    assert_eq!(close.code, CloseCode::Normal);
    // Reading on sends the client's close reply; then the stream ends.
    assert!(c.ws.next().await.is_none());
    lc.ended(1).await;
    assert_eq!(lc.ack(unacked).await, None);
    // A push waits for the next connection (its frame may come before the pong).
    let dial = async {
        let mut c2 = Client::dial(&url(&fake).await).await.expect("upgraded");
        c2.ping().await;
        c2
    };
    let (seq, mut c2) = tokio::join!(lc.push_no_wait(Push::event(b"{}".to_vec())), dial);
    assert_eq!(c2.next_data().await.seq_id, seq);
    assert_eq!(lc.stats().phases, [Phase::Ended, Phase::Open]);
}

#[tokio::test]
async fn a_silent_connection_neither_reads_nor_writes_nor_closes() {
    let (fake, lc) = FakeFeishu::planner_with_long_connection().await;
    let mut c1 = Client::connected(&fake).await;
    let seq = lc.push_no_wait(Push::event(b"{}".to_vec())).await;
    let pushed = c1.next_frame().await;
    lc.go_silent();
    c1.ping().await;
    c1.ack(&pushed, &json!({"code": 200})).await;
    // Nothing read on connection 1 can count any more: its ACK is lost.
    assert_eq!(lc.ack(seq).await, None);
    // A full round trip on a second connection, then still nothing on the first.
    let mut c2 = Client::connected(&fake).await;
    assert!(c1.ws.next().now_or_never().is_none(), "no pong, no close");
    let seq2 = lc.push_no_wait(Push::event(b"{}".to_vec())).await;
    assert_eq!(c2.next_frame().await.seq_id, seq2);
    let stats = lc.stats();
    assert_eq!(
        (stats.phases, stats.pings),
        (vec![Phase::Silent, Phase::Open], vec![1, 1])
    );
    assert_eq!(lc.violations(), Vec::<String>::new());
}

#[test]
fn payloads_are_schema_2_envelopes_like_the_webhooks() {
    let v: Value =
        serde_json::from_slice(&message_event("ev-1", "om_1", "oc_x", "hi", true)).expect("JSON");
    assert_eq!(
        (&v["schema"], &v["header"]["event_id"]),
        (&json!("2.0"), &json!("ev-1"))
    );
    assert_eq!(v["header"]["event_type"], "im.message.receive_v1");
    assert_eq!(v["header"]["token"], TOKEN);
    let m = &v["event"]["message"];
    assert_eq!(
        (&m["message_id"], &m["chat_id"]),
        (&json!("om_1"), &json!("oc_x"))
    );
    assert_eq!(m["mentions"][0]["id"]["open_id"], BOT_OPEN_ID);
    assert_eq!(m["content"], json!({"text": "@_user_1 hi"}).to_string());
    let v: Value =
        serde_json::from_slice(&message_event("ev-2", "om_2", "oc_x", "hi", false)).expect("JSON");
    assert_eq!(v["event"]["message"]["mentions"], json!([]));
    let v: Value =
        serde_json::from_slice(&event_payload("ev-3", &Msg::dm("om_3", "yo"))).expect("JSON");
    assert_eq!(v["event"]["message"]["chat_type"], "p2p");
    let press = card_action(
        "ev-c",
        json!({"action": "stop", "turn_id": "t"}),
        "ou_bob",
        "oc_x",
    );
    let v: Value = serde_json::from_slice(&press).expect("JSON");
    assert_eq!(
        (&v["header"]["event_type"], &v["header"]["token"]),
        (&json!("card.action.trigger"), &json!(TOKEN))
    );
    let e = &v["event"];
    assert_eq!(
        (&e["operator"]["open_id"], &e["action"]["value"]["turn_id"]),
        (&json!("ou_bob"), &json!("t"))
    );
    assert_eq!(
        (
            &e["context"]["open_chat_id"],
            &e["context"]["open_message_id"]
        ),
        (&json!("oc_x"), &json!(CARD_MESSAGE_ID))
    );
    let v: Value = serde_json::from_slice(&without_token(&press)).expect("JSON");
    assert!(v["header"].get("token").is_none());
    assert_eq!(v["header"]["event_id"], "ev-c");
}
