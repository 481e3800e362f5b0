//! Media out: an agent's files and images reach its turn's thread through signed
//! `POST /agent/{profile}/turns/{turn_id}/attachments`, uploaded within Feishu's limits
//! and sent once however often the request is retried; bad uploads are refused before
//! anything reaches Feishu. Listed in `GET /turns/{id}`.

use std::sync::atomic::Ordering;

use crate::{
    both_backends,
    support::{
        Answer, TestApp, TestDb,
        app::answer,
        config, config_toml,
        fake_feishu::{FakeFeishu, IMAGE_MAX_BYTES},
        feishu::Msg,
        gated_agent::{GatedAgent, sign_bytes},
    },
};

/// A multipart body: `fields`, then `file` named `filename`.
fn multipart(fields: &[(&str, &str)], filename: &str, file: &[u8]) -> (String, Vec<u8>) {
    let boundary = "test-boundary-7d1f";
    let body =
        feishu_bridge::feishu_api::multipart_form(boundary, fields, ("file", filename, file));
    (format!("multipart/form-data; boundary={boundary}"), body)
}

/// POSTs an attachment of `turn_id` as the planner's agent (signed unless `signed` is
/// false), with an `Idempotency-Key` when given.
async fn attach(
    app: &TestApp,
    turn_id: &str,
    (content_type, body): &(String, Vec<u8>),
    key: Option<&str>,
    signed: bool,
) -> Answer {
    let ts = feishu_bridge::util::now_secs().to_string();
    let sig = if signed {
        sign_bytes("att-1", &ts, body)
    } else {
        "v1,bm90IGEgc2lnbmF0dXJl".to_string()
    };
    let mut r = app
        .client
        .post(format!(
            "{}/agent/planner/turns/{turn_id}/attachments",
            app.base
        ))
        .header("webhook-id", "att-1")
        .header("webhook-timestamp", &ts)
        .header("webhook-signature", sig)
        .header("content-type", content_type)
        .body(body.clone());
    if let Some(k) = key {
        r = r.header("idempotency-key", k);
    }
    answer(r.send().await.expect("sent")).await
}

/// The planner with a held webhook agent, talking to `fake`; returns the app and the
/// turn id of a running turn in the group thread `om_root`.
async fn running(db: &TestDb, fake: &FakeFeishu, agent: &mut GatedAgent) -> (TestApp, String) {
    let text = config_toml(db, &format!("{}{}", fake.profile_keys(), agent.config()));
    let mut app = TestApp::spawn(config(&text)).await;
    app.route(
        &Msg::group("om_make", "draw the chart")
            .at_bot()
            .in_thread("om_root"),
    )
    .await;
    let turn = agent.next().await;
    (app, turn["turn_id"].as_str().expect("turn id").to_string())
}

/// Image messages the fake created.
fn images_sent(fake: &FakeFeishu) -> Vec<serde_json::Value> {
    fake.state
        .sent
        .lock()
        .expect("lock")
        .iter()
        .filter(|(_, body)| body["msg_type"] == "image" || body["msg_type"] == "file")
        .map(|(_, body)| body.clone())
        .collect()
}

async fn sent_once(db: TestDb) {
    let fake = FakeFeishu::planner().await;
    let mut agent = GatedAgent::start().await;
    let (app, turn_id) = running(&db, &fake, &mut agent).await;
    let chart = multipart(&[("kind", "image")], "chart.png", b"\x89PNG chart bytes");
    // The first answer is lost on its way back: the bridge's retry keeps its uuid.
    fake.state.lose_answers.store(1, Ordering::SeqCst);
    let first = attach(&app, &turn_id, &chart, Some("chart-1"), true).await;
    assert_eq!(first.status, 200, "{}", first.text);
    assert_eq!(first.json["duplicate"], false);
    let message_id = first.json["message_id"].as_str().expect("sent").to_string();
    // The agent retries the request (its answer was lost too): nothing is sent again.
    let again = attach(&app, &turn_id, &chart, Some("chart-1"), true).await;
    assert_eq!(again.status, 200, "{}", again.text);
    assert_eq!(again.json["duplicate"], true);
    assert_eq!(again.json["message_id"].as_str(), Some(message_id.as_str()));
    let sent = images_sent(&fake);
    assert_eq!(sent.len(), 1, "{sent:?}");
    assert_eq!(sent[0]["reply_in_thread"], true, "into the turn's thread");

    // Without a key, the same bytes, name and kind are the same attachment.
    let report = multipart(&[], "report.pdf", b"%PDF-1.7 report");
    let a = attach(&app, &turn_id, &report, None, true).await;
    let b = attach(&app, &turn_id, &report, None, true).await;
    assert_eq!((a.status, b.status), (200, 200), "{} {}", a.text, b.text);
    assert_eq!(
        (a.json["duplicate"].as_bool(), b.json["duplicate"].as_bool()),
        (Some(false), Some(true))
    );
    assert_eq!(a.json["kind"], "file");
    assert_eq!(images_sent(&fake).len(), 2);
    let uploads = fake.state.media.uploads();
    let file = uploads
        .iter()
        .find(|u| u.kind == "file")
        .expect("a file upload");
    assert_eq!(
        (file.name.as_str(), file.file_type.as_str()),
        ("report.pdf", "pdf")
    );

    let t = app.get(&format!("/turns/{turn_id}")).await;
    let listed: Vec<(&str, &str)> = t.json["attachments"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|a| {
            (
                a["name"].as_str().unwrap_or(""),
                a["kind"].as_str().unwrap_or(""),
            )
        })
        .collect();
    assert_eq!(listed.len(), 2, "{}", t.text);
    assert!(listed.contains(&("chart.png", "image")) && listed.contains(&("report.pdf", "file")));
    agent.open();
    app.turn_ended("om_make").await;
    app.stop().await.expect("clean stop");
}
both_backends!(
    an_attachment_is_sent_once_despite_a_retried_request,
    sent_once
);

async fn refused(db: TestDb) {
    let fake = FakeFeishu::planner().await;
    let mut agent = GatedAgent::start().await;
    let (app, turn_id) = running(&db, &fake, &mut agent).await;

    let empty = multipart(&[], "empty.txt", b"");
    let a = attach(&app, &turn_id, &empty, None, true).await;
    assert_eq!(
        (a.status, a.code()),
        (400, "empty_attachment"),
        "{}",
        a.text
    );

    let huge = vec![7u8; IMAGE_MAX_BYTES + 1];
    let big = multipart(&[("kind", "image")], "huge.png", &huge);
    let a = attach(&app, &turn_id, &big, None, true).await;
    assert_eq!(
        (a.status, a.code()),
        (413, "attachment_too_large"),
        "{}",
        a.text
    );

    let odd = multipart(&[("kind", "video")], "clip.mp4", b"data");
    let a = attach(&app, &turn_id, &odd, None, true).await;
    assert_eq!((a.status, a.code()), (400, "bad_request"), "{}", a.text);

    let fine = multipart(&[], "notes.txt", b"notes");
    let a = attach(&app, &turn_id, &fine, None, false).await;
    assert_eq!((a.status, a.code()), (401, "bad_signature"), "{}", a.text);
    let a = attach(&app, "turn_unknown", &fine, None, true).await;
    assert_eq!((a.status, a.code()), (404, "unknown_turn"), "{}", a.text);
    let not_multipart = ("application/json".to_string(), b"{}".to_vec());
    let a = attach(&app, &turn_id, &not_multipart, None, true).await;
    assert_eq!((a.status, a.code()), (400, "bad_request"), "{}", a.text);

    assert_eq!(fake.state.media.upload_requests.load(Ordering::SeqCst), 0);
    assert!(images_sent(&fake).is_empty());
    let t = app.get(&format!("/turns/{turn_id}")).await;
    assert_eq!(t.json["attachments"], serde_json::json!([]), "{}", t.text);
    agent.open();
    app.turn_ended("om_make").await;
    app.stop().await.expect("clean stop");
}
both_backends!(bad_uploads_are_refused_with_nothing_sent, refused);
