//! Media in: what people share reaches the agent as content. Images (fetched when a turn
//! needs them, bounded in count and size) reach an OpenAI-compatible model as
//! `image_url` data URLs and a webhook agent as signed `GET /media/{token}` URLs; small
//! text files are inlined (cut to their budget), other files listed; forwarded bundles
//! are expanded; doc links read (or named, when the bot cannot read them); a recalled
//! image is gone from the next turn. Every case on both databases, against the fake
//! Open API's resources, bundles and docs.

mod attachments;
mod fake_rules;

use base64::{Engine, engine::general_purpose::STANDARD};
use serde_json::{Value, json};

use crate::{
    both_backends,
    support::{
        TestApp, TestDb, config, config_toml,
        fake_feishu::FakeFeishu,
        fake_openai::FakeOpenAi,
        feishu::{Msg, Signer},
        gated_agent::{AGENT_SECRET, GatedAgent},
    },
};

/// A PNG header and `n` bytes more: an image of `n + 8` bytes.
fn png(n: usize) -> Vec<u8> {
    let mut bytes = b"\x89PNG\r\n\x1a\n".to_vec();
    bytes.extend((0..n).map(|i| (i % 251) as u8));
    bytes
}

/// The planner against `fake`, answering through the OpenAI-compatible `llm`, with
/// thread context on and `media` appended to `[media]`.
fn openai_planner(db: &TestDb, fake: &FakeFeishu, llm: &FakeOpenAi, media: &str) -> String {
    config_toml(
        db,
        &format!(
            "{}[profiles.agent]\nkind = \"openai\"\nbase_url = \"{}\"\nmodel = \"m\"\nstream = false\n\
             [context]\nshared_thread_enabled = true\n[media]\n{media}\n",
            fake.profile_keys(),
            llm.base
        ),
    )
}

/// The user message of the `n`-th model request (from 1): its content as sent.
async fn prompt_of(llm: &FakeOpenAi, n: usize) -> Value {
    let seen = llm.requests(n).await;
    let messages = seen[n - 1].body["messages"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    messages.last().cloned().unwrap_or_default()["content"].clone()
}

/// The text part of a message content (the content itself when it is a string).
fn text_of(content: &Value) -> String {
    match content {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter(|p| p["type"] == "text")
            .filter_map(|p| p["text"].as_str())
            .collect(),
        _ => String::new(),
    }
}

/// The data URLs of the image parts of a message content.
fn images_of(content: &Value) -> Vec<String> {
    content
        .as_array()
        .into_iter()
        .flatten()
        .filter(|p| p["type"] == "image_url")
        .filter_map(|p| p["image_url"]["url"].as_str().map(str::to_string))
        .collect()
}

/// The explain record of the decision made for `message_id` (in a DM or the group).
async fn decision_of(app: &TestApp, root: &str, message_id: &str) -> Value {
    let a = app.explain("planner", root, Some(message_id)).await;
    assert_eq!(a.status, 200, "{}", a.text);
    a.json
}

/// The reasons of the excluded media items of a decision, as (type, reason).
fn skipped(decision: &Value) -> Vec<(String, String)> {
    decision["excluded"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|x| x["item_id"] == 0)
        .map(|x| {
            (
                x["item_type"].as_str().unwrap_or_default().to_string(),
                x["reason"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect()
}

async fn image_to_openai(db: TestDb) {
    let fake = FakeFeishu::planner().await;
    let llm = FakeOpenAi::start(vec!["A cat.".into()]).await;
    let mut app = TestApp::spawn(config(&openai_planner(&db, &fake, &llm, ""))).await;
    let shot = png(64);
    fake.state
        .media
        .image("om_shot", "img_v2_shot", shot.clone());
    let msg = Msg::dm("om_shot", "").typed("image", json!({"image_key": "img_v2_shot"}));
    // Nothing is fetched at ingress.
    app.route(&msg).await;
    let content = prompt_of(&llm, 1).await;
    let urls = images_of(&content);
    assert_eq!(
        urls,
        [format!("data:image/png;base64,{}", STANDARD.encode(&shot))],
        "{content}"
    );
    assert!(
        text_of(&content).contains("[Feishu Shared Content]"),
        "{content}"
    );
    assert_eq!(app.turn_ended("om_shot").await.state, "succeeded");
    let d = decision_of(&app, "om_shot", "om_shot").await;
    let types: Vec<&str> = d["selected"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|s| s["item_type"].as_str())
        .collect();
    assert_eq!(types, ["image"], "{d}");
    assert_eq!(d["diagnostics"]["media"]["images"], 1, "{d}");

    // Asked about it later, quoting it: the quoted message's image comes along.
    let ask = Msg::dm("om_what", "what is in it?").quoting("om_shot");
    assert_eq!(app.ask(&ask).await, "answered");
    let content = prompt_of(&llm, 2).await;
    assert_eq!(images_of(&content).len(), 1, "{content}");
    app.stop().await.expect("clean stop");
}
both_backends!(an_image_reaches_an_openai_compatible_model, image_to_openai);

async fn image_to_webhook(db: TestDb) {
    let fake = FakeFeishu::planner().await;
    let mut agent = GatedAgent::start().await;
    let text = config_toml(&db, &format!("{}{}", fake.profile_keys(), agent.config()));
    let mut app = TestApp::spawn(config(&text)).await;
    let shot = png(300);
    fake.state.media.image("om_w", "img_v2_w", shot.clone());
    let post = json!({"title": "", "content": [[{"tag": "text", "text": "what is this?"}],
                                               [{"tag": "img", "image_key": "img_v2_w"}]]});
    let msg = Msg::dm("om_w", "").typed("post", post);
    let a = app.event(&Signer::default().deliver(&msg)).await;
    assert_eq!(a.status, 200, "{}", a.text);
    let turn = agent.next().await;
    let media = turn["media"].as_array().cloned().unwrap_or_default();
    assert_eq!(media.len(), 1, "{turn}");
    assert_eq!(
        (media[0]["item_type"].as_str(), media[0]["size"].as_u64()),
        (Some("image"), Some(shot.len() as u64))
    );
    let url = media[0]["url"].as_str().expect("a URL").to_string();
    assert!(url.starts_with("/media/"), "{url}");
    // No file body in the database: the URL fetches it from Feishu as it is read.
    let got = app
        .client
        .get(format!("{}{url}", app.base))
        .send()
        .await
        .expect("sent");
    assert_eq!(got.status(), 200);
    assert_eq!(got.headers()["content-type"], "image/png");
    assert_eq!(got.bytes().await.expect("body").to_vec(), shot);

    // Altered, expired, or signed with another secret: refused.
    let token = url.trim_start_matches("/media/");
    let tampered = format!("{}x", token);
    let a = app.get_anonymous(&format!("/media/{tampered}")).await;
    assert_eq!((a.status, a.code()), (403, "bad_media_token"), "{}", a.text);
    let mut claims = feishu_bridge::media::token::peek(token).expect("claims");
    claims.expires = feishu_bridge::util::now_secs() - 1;
    let expired = feishu_bridge::media::token::sign(AGENT_SECRET, &claims);
    let a = app.get_anonymous(&format!("/media/{expired}")).await;
    assert_eq!((a.status, a.code()), (410, "media_expired"), "{}", a.text);
    claims.expires = feishu_bridge::util::now_secs() + 60;
    let foreign = feishu_bridge::media::token::sign("another secret", &claims);
    let a = app.get_anonymous(&format!("/media/{foreign}")).await;
    assert_eq!((a.status, a.code()), (403, "bad_media_token"), "{}", a.text);

    // Recalled: the URL stops serving.
    agent.open();
    app.turn_ended("om_w").await;
    let a = app
        .event(&Signer::default().recall("om_w", "oc_dm_alice"))
        .await;
    assert_eq!(a.status, 200);
    assert_eq!(app.settled("ev-recall-om_w").await, "done");
    let a = app.get_anonymous(&url).await;
    assert_eq!((a.status, a.code()), (410, "media_gone"), "{}", a.text);
    app.stop().await.expect("clean stop");
}
both_backends!(
    an_image_reaches_a_webhook_agent_as_a_signed_expiring_url,
    image_to_webhook
);

async fn file_to_webhook(db: TestDb) {
    let fake = FakeFeishu::planner().await;
    let mut agent = GatedAgent::start().await;
    let text = config_toml(
        &db,
        &format!(
            "{}{}[media]\nmax_file_chars = 100\n",
            fake.profile_keys(),
            agent.config()
        ),
    );
    let app = TestApp::spawn(config(&text)).await;
    let log: Vec<u8> = (0..2000).map(|i| b"abcdefghij\n"[i % 11]).collect();
    fake.state.media.file("om_f", "file_f", log.clone());
    let msg = Msg::dm("om_f", "").typed(
        "file",
        json!({"file_key": "file_f", "file_name": "run.log"}),
    );
    let a = app.event(&Signer::default().deliver(&msg)).await;
    assert_eq!(a.status, 200, "{}", a.text);
    let turn = agent.next().await;
    let items = turn["context_items"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let inlined = items
        .iter()
        .find(|i| i["item_type"] == "text_file")
        .expect("inlined");
    assert_eq!(
        (
            inlined["author_label"].as_str(),
            inlined["truncated"].as_bool()
        ),
        (Some("run.log"), Some(true))
    );
    assert_eq!(
        inlined["text"].as_str().map(|t| t.chars().count()),
        Some(100)
    );
    // The whole file, streamed from Feishu through the bridge.
    let url = turn["media"][0]["url"].as_str().expect("a URL").to_string();
    let got = app
        .client
        .get(format!("{}{url}", app.base))
        .send()
        .await
        .expect("sent");
    assert_eq!(got.status(), 200);
    assert_eq!(got.bytes().await.expect("body").to_vec(), log);
    agent.open();
    app.turn_ended("om_f").await;
    app.stop().await.expect("clean stop");
}
both_backends!(
    a_file_reaches_a_webhook_agent_inlined_and_by_url,
    file_to_webhook
);

async fn image_budgets(db: TestDb) {
    let fake = FakeFeishu::planner().await;
    let llm = FakeOpenAi::start(vec!["ok".into()]).await;
    let media = "max_images = 2\nmax_image_bytes = 1000\n";
    let mut app = TestApp::spawn(config(&openai_planner(&db, &fake, &llm, media))).await;
    for (key, size) in [
        ("img_a", 10),
        ("img_big", 5000),
        ("img_b", 20),
        ("img_c", 30),
    ] {
        fake.state.media.image("om_many", key, png(size));
    }
    let imgs: Vec<Value> = ["img_a", "img_big", "img_b", "img_c"]
        .iter()
        .map(|k| json!([{"tag": "img", "image_key": k}]))
        .collect();
    let msg = Msg::dm("om_many", "").typed("post", json!({"title": "four", "content": imgs}));
    assert_eq!(app.ask(&msg).await, "answered");
    let content = prompt_of(&llm, 1).await;
    let urls = images_of(&content);
    assert_eq!(
        urls,
        [png(10), png(20)].map(|b| format!("data:image/png;base64,{}", STANDARD.encode(b)))
    );
    let d = decision_of(&app, "om_many", "om_many").await;
    assert_eq!(
        skipped(&d),
        [
            ("image".to_string(), "too_large".to_string()),
            ("image".to_string(), "too_many_images".to_string())
        ],
        "{d}"
    );
    let reasons = &d["diagnostics"]["media"]["skipped"];
    assert!(
        reasons[0]["detail"]
            .as_str()
            .is_some_and(|r| r.contains("5008 bytes")),
        "{reasons}"
    );
    // The fourth image was never fetched.
    let fetched = fake
        .state
        .media
        .resource_requests
        .load(std::sync::atomic::Ordering::SeqCst);
    assert_eq!(fetched, 3);
    let text = text_of(&content);
    assert!(text.contains("not included (too_many_images"), "{text}");
    // The readable report shows the media and what was left out.
    let report = app
        .client
        .get(format!("{}/explain/om_many?profile=planner", app.base))
        .bearer_auth(crate::support::ADMIN)
        .header("accept", "text/plain")
        .send()
        .await
        .expect("sent")
        .text()
        .await
        .expect("text");
    assert!(
        report.contains(
            "media        images=2 text_files=0 files=0 bundles=0 docs=0 chars=0 skipped=2"
        ),
        "{report}"
    );
    assert!(
        report.contains("  skipped    image image: too_large (5008 bytes"),
        "{report}"
    );
    app.stop().await.expect("clean stop");
}
both_backends!(
    oversize_and_too_many_images_are_skipped_with_a_reason,
    image_budgets
);

async fn log_file(db: TestDb) {
    let fake = FakeFeishu::planner().await;
    let llm = FakeOpenAi::start(vec!["ok".into()]).await;
    let media = "max_file_chars = 200\nmax_files_chars = 300\n";
    let mut app = TestApp::spawn(config(&openai_planner(&db, &fake, &llm, media))).await;
    let log: String = (0..100).map(|i| format!("line {i:03}\n")).collect();
    fake.state
        .media
        .file("om_log", "file_log", log.clone().into_bytes());
    let msg = Msg::dm("om_log", "").typed(
        "file",
        json!({"file_key": "file_log", "file_name": "app.log"}),
    );
    assert_eq!(app.ask(&msg).await, "answered");
    let text = text_of(&prompt_of(&llm, 1).await);
    let kept: String = log.chars().take(200).collect();
    assert!(text.contains("text_file app.log (truncated):"), "{text}");
    assert!(text.contains(kept.trim_end()), "{text}");
    assert!(!text.contains("line 025"), "cut at 200 characters: {text}");
    let d = decision_of(&app, "om_log", "om_log").await;
    let item = d["selected"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|s| s["item_type"] == "text_file")
        .cloned()
        .unwrap_or_default();
    assert_eq!(
        (item["chars"].as_u64(), item["truncated"].as_bool()),
        (Some(200), Some(true)),
        "{d}"
    );

    // A file that is not text is listed by name and size, not inlined.
    fake.state.media.file("om_pdf", "file_pdf", vec![0u8; 4096]);
    let msg = Msg::dm("om_pdf", "").typed(
        "file",
        json!({"file_key": "file_pdf", "file_name": "spec.pdf"}),
    );
    assert_eq!(app.ask(&msg).await, "answered");
    let text = text_of(&prompt_of(&llm, 2).await);
    assert!(
        text.contains("file spec.pdf:\na file of 4096 bytes, not inlined"),
        "{text}"
    );
    app.stop().await.expect("clean stop");
}
both_backends!(a_log_file_is_inlined_and_truncated, log_file);

async fn bundle(db: TestDb) {
    let fake = FakeFeishu::planner().await;
    let llm = FakeOpenAi::start(vec!["ok".into()]).await;
    let mut app = TestApp::spawn(config(&openai_planner(&db, &fake, &llm, ""))).await;
    fake.state.media.bundle(
        "om_fwd",
        &[
            ("ou_bob", "deploy failed at step 3"),
            ("ou_carol", "rolled back"),
        ],
    );
    let msg = Msg::dm("om_fwd", "").typed("merge_forward", json!({}));
    assert_eq!(app.ask(&msg).await, "answered");
    let text = text_of(&prompt_of(&llm, 1).await);
    assert!(
        text.contains(
            "bundle forwarded messages (2 messages):\nou_bob: deploy failed at step 3\nou_carol: rolled back"
        ),
        "{text}"
    );
    let d = decision_of(&app, "om_fwd", "om_fwd").await;
    assert_eq!(d["diagnostics"]["media"]["bundles"], 1, "{d}");
    app.stop().await.expect("clean stop");
}
both_backends!(a_forwarded_bundle_is_expanded, bundle);

async fn docs(db: TestDb) {
    let fake = FakeFeishu::planner().await;
    let llm = FakeOpenAi::start(vec!["ok".into()]).await;
    let media = "max_doc_chars = 100\n";
    let mut app = TestApp::spawn(config(&openai_planner(&db, &fake, &llm, media))).await;
    let long: String = "The rollout plan. ".repeat(20);
    fake.state
        .media
        .wiki_node("WikiPlan1", "docx", "DocPlan1", "Rollout plan");
    fake.state.media.doc("DocPlan1", &long);
    fake.state.media.forbid("DocSecret9");
    let msg = Msg::dm(
        "om_docs",
        "compare https://acme.feishu.cn/wiki/WikiPlan1 with https://acme.feishu.cn/docx/DocSecret9",
    );
    assert_eq!(app.ask(&msg).await, "answered");
    let text = text_of(&prompt_of(&llm, 1).await);
    let kept: String = long.chars().take(100).collect();
    assert!(
        text.contains(&format!(
            "doc Rollout plan (WikiPlan1) (truncated):\n{kept}\n"
        )),
        "{text}"
    );
    assert!(
        text.contains("doc docx DocSecret9:\nnot included (not_readable: Open API error 1770032"),
        "the unreadable doc is named: {text}"
    );
    let d = decision_of(&app, "om_docs", "om_docs").await;
    assert_eq!(
        skipped(&d),
        [("doc".to_string(), "not_readable".to_string())]
    );
    app.stop().await.expect("clean stop");
}
both_backends!(a_readable_and_an_unreadable_doc, docs);

async fn recalled_image(db: TestDb) {
    let fake = FakeFeishu::planner().await;
    let llm = FakeOpenAi::start(vec!["ok".into()]).await;
    let mut app = TestApp::spawn(config(&openai_planner(&db, &fake, &llm, ""))).await;
    fake.state.media.image("om_img", "img_r", png(32));
    app.route(&Msg::group("om_root", "the dashboard broke"))
        .await;
    let shot = Msg::group("om_img", "")
        .typed("image", json!({"image_key": "img_r"}))
        .in_thread("om_root")
        .by("ou_bob");
    app.route(&shot).await;
    let ask = Msg::group("om_q1", "what do you see?")
        .at_bot()
        .in_thread("om_root");
    assert_eq!(app.ask(&ask).await, "answered");
    assert_eq!(images_of(&prompt_of(&llm, 1).await).len(), 1);

    let a = app
        .event(&Signer::default().recall("om_img", "oc_group"))
        .await;
    assert_eq!(a.status, 200);
    assert_eq!(app.settled("ev-recall-om_img").await, "done");
    let ask = Msg::group("om_q2", "and now?")
        .at_bot()
        .in_thread("om_root");
    assert_eq!(app.ask(&ask).await, "answered");
    let content = prompt_of(&llm, 2).await;
    assert!(images_of(&content).is_empty(), "{content}");
    assert!(
        !text_of(&content).contains("[Feishu Shared Content]"),
        "{content}"
    );
    let fetched = fake
        .state
        .media
        .resource_requests
        .load(std::sync::atomic::Ordering::SeqCst);
    assert_eq!(fetched, 1, "the recalled image is not fetched again");
    app.stop().await.expect("clean stop");
}
both_backends!(a_recalled_image_is_gone_from_the_next_turn, recalled_image);
