//! Logs carry no secret and no conversation text, even at `RUST_LOG=trace` (every crate,
//! every span): the real binary runs full turns through a fake Open API and two fake
//! agents (an OpenAI-compatible model and a webhook agent), takes card presses on both
//! callback URLs, answers the operating routes, and signs in to the web view (a wrong
//! token, then the right one) and shows a thread; then its whole output is searched for
//! every credential it was given and every text it carried.

use base64::Engine as _;
use serde_json::{Value, json};

use crate::{
    both_backends,
    support::{
        Kind, Request, Signer, TestDb,
        cli::{Served, write_config},
        fake_feishu::FakeFeishu,
        fake_openai::FakeOpenAi,
        fake_summarizer::KEY as DIGEST_KEY,
        feishu::{self, Msg, now_secs},
        gated_agent::GatedAgent,
    },
};

const ADMIN_TOKEN: &str = "admin-token-never-logged";
const APP_SECRET: &str = "app-secret-never-logged";
const LLM_KEY: &str = "sk-llm-key-never-logged";
const CODER_KEY: &str = "coder-encrypt-key-never-logged";
const CODER_TOKEN: &str = "coder-verification-token-never-logged";
const AGENT_KEY: &[u8] = b"coder-agent-signing-key-never-logged";
const PG_PASSWORD: &str = "pg-password-never-logged";

const ASKED: &str = "the quarterly numbers stay between us";
const ANSWER: [&str; 2] = ["the board approved ", "the merger on friday"];
const ASKED_CODER: &str = "rotate the staging credentials tonight";
const CARD_NOTE: &str = "card note: pay the supplier early";
const LEGACY_NOTE: &str = "legacy card note: cancel the offsite";

fn config_text(fake: &FakeFeishu, llm: &FakeOpenAi, agent: &GatedAgent) -> String {
    format!(
        "[server]\nlisten = \"127.0.0.1:0\"\n\
         [worker]\npoll_interval_ms = 50\nretry_base_ms = 5\n\
         [[profiles]]\nname = \"planner\"\napp_id = \"{app}\"\nbot_open_id = \"{bot}\"\n\
         api_base = \"{api}\"\n\
         [profiles.agent]\nkind = \"openai\"\nbase_url = \"{llm}\"\nmodel = \"m\"\nstream = false\n\
         [[profiles]]\nname = \"coder\"\napp_id = \"cli_test_coder\"\nbot_open_id = \"ou_bot_coder\"\n\
         dry_run = true\n\
         [profiles.agent]\nkind = \"webhook\"\nurl = \"{agent}\"\ntimeout_secs = 60\n",
        app = feishu::APP_ID,
        bot = feishu::BOT_OPEN_ID,
        api = fake.base,
        llm = llm.base,
        agent = agent.url,
    )
}

/// `DATABASE_URL` for the bridge: on Postgres, with a password (trust authentication
/// ignores it, so the test server takes it, and the bridge still holds it).
fn database_url(db: &TestDb) -> String {
    match db.kind {
        Kind::Sqlite => db.url.clone(),
        Kind::Postgres => {
            let mut url = url::Url::parse(&db.url).expect("a Postgres URL");
            url.set_password(Some(PG_PASSWORD))
                .expect("a password fits");
            url.to_string()
        }
    }
}

/// A `card.action.trigger` press of the "new session" button of `turn_id`, with a note
/// and a form field.
fn press(turn_id: &str) -> Request {
    let event = json!({
        "operator": {"open_id": "ou_alice", "tenant_key": "tenant_test"},
        "token": "c-delayed-update-token",
        "action": {
            "tag": "button",
            "value": {"action": "new_session", "turn_id": turn_id, "note": CARD_NOTE},
            "form_value": {"comment": CARD_NOTE},
        },
        "host": "im_message",
        "context": {"open_message_id": "om_bot_reply_1", "open_chat_id": "oc_group"},
    });
    let signer = Signer::default();
    signer.request(&signer.envelope("ev-log-press", "card.action.trigger", event))
}

/// The same press through the legacy card URL: plaintext, SHA-1 signed with the token.
fn legacy_press(turn_id: &str) -> Request {
    use sha1::{Digest, Sha1};
    let body = json!({
        "open_id": "ou_alice", "open_message_id": "om_bot_reply_1", "open_chat_id": "oc_group",
        "tenant_key": "tenant_test", "token": "c-legacy",
        "action": {"tag": "button",
                   "value": {"action": "new_session", "turn_id": turn_id, "note": LEGACY_NOTE}},
    })
    .to_string();
    let (ts, nonce) = (now_secs().to_string(), "n-log");
    let mut h = Sha1::new();
    h.update(format!("{ts}{nonce}{}", feishu::TOKEN).as_bytes());
    h.update(body.as_bytes());
    Request {
        body,
        headers: vec![
            ("x-lark-request-timestamp".into(), ts),
            ("x-lark-request-nonce".into(), nonce.into()),
            ("x-lark-signature".into(), hex::encode(h.finalize())),
        ],
    }
}

/// Signs in to the web view with a wrong token, then the right one (both in the form),
/// and opens the planner's thread, which shows the asked text.
async fn web_view(base: &str) {
    let web = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .expect("client");
    let form = web
        .get(format!("{base}/ui/login"))
        .send()
        .await
        .expect("sent");
    let login = form
        .headers()
        .get("set-cookie")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .unwrap_or_default()
        .to_string();
    let body = form.text().await.expect("the form");
    let marker = "name=\"csrf\" value=\"";
    let csrf = body
        .split(marker)
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .unwrap_or_default()
        .to_string();
    let mut session = String::new();
    for (token, status) in [("wrong-web-view-token", 401), (ADMIN_TOKEN, 303)] {
        let answer = web
            .post(format!("{base}/ui/login"))
            .header("cookie", &login)
            .form(&[("token", token), ("csrf", &csrf)])
            .send()
            .await
            .expect("sent");
        assert_eq!(answer.status(), status);
        if let Some(c) = answer
            .headers()
            .get_all("set-cookie")
            .iter()
            .filter_map(|v| v.to_str().ok())
            .find(|c| c.starts_with("fb_ui_session="))
        {
            session = c.split(';').next().unwrap_or_default().to_string();
        }
    }
    let page = web
        .get(format!("{base}/ui/threads/om_log_plan"))
        .header("cookie", &session)
        .send()
        .await
        .expect("sent");
    assert_eq!(page.status(), 200);
    assert!(page.text().await.unwrap_or_default().contains(ASKED));
}

async fn full_turns_leave_no_secret_or_text_in_trace_logs(db: TestDb) {
    let fake = FakeFeishu::start(APP_SECRET, feishu::BOT_OPEN_ID).await;
    let llm = FakeOpenAi::start(ANSWER.iter().map(|s| s.to_string()).collect()).await;
    let agent = GatedAgent::start().await;
    agent.open();
    let agent_secret = format!(
        "whsec_{}",
        base64::engine::general_purpose::STANDARD.encode(AGENT_KEY)
    );
    let dir = tempfile::tempdir().expect("dir");
    let path = write_config(&dir, &config_text(&fake, &llm, &agent));
    let db_url = database_url(&db);
    let mut served = Served::start(
        &path,
        "trace",
        &[
            ("DATABASE_URL", db_url.as_str()),
            ("FEISHU_BRIDGE_ADMIN_TOKEN", ADMIN_TOKEN),
            ("FEISHU_BRIDGE_PLANNER_ENCRYPT_KEY", feishu::ENCRYPT_KEY),
            ("FEISHU_BRIDGE_PLANNER_VERIFICATION_TOKEN", feishu::TOKEN),
            ("FEISHU_BRIDGE_PLANNER_APP_SECRET", APP_SECRET),
            ("FEISHU_BRIDGE_PLANNER_AGENT_API_KEY", LLM_KEY),
            ("FEISHU_BRIDGE_CODER_ENCRYPT_KEY", CODER_KEY),
            ("FEISHU_BRIDGE_CODER_VERIFICATION_TOKEN", CODER_TOKEN),
            ("FEISHU_BRIDGE_CODER_AGENT_SECRET", agent_secret.as_str()),
            ("FEISHU_BRIDGE_DIGEST_API_KEY", DIGEST_KEY),
        ],
    )
    .await;
    let base = served.base.clone();
    let client = reqwest::Client::new();
    let post = |profile: &str, kind: &str, req: &Request| {
        req.apply(client.post(format!("{base}/webhook/{profile}/{kind}")))
            .send()
    };

    // The planner: event → model → reply through the fake Open API.
    let asked = Msg::group("om_log_plan", ASKED).at_bot();
    let r = post("planner", "event", &Signer::default().deliver(&asked));
    assert_eq!(r.await.expect("sent").status(), 200);
    served
        .wait_for_line("the planner's turn", |l| {
            l.contains("turn finished") && l.contains("om_log_plan")
        })
        .await;
    let sent = fake.state.sent.lock().expect("lock").clone();
    assert_eq!(sent.len(), 1, "{sent:?}");
    assert!(
        sent[0].1["content"]
            .as_str()
            .unwrap_or_default()
            .contains(ANSWER[1])
    );
    let seen = llm.requests(1).await;
    assert_eq!(
        seen[0].authorization.as_deref(),
        Some(format!("Bearer {LLM_KEY}").as_str())
    );

    // The coder: event → webhook agent (signed with its secret) → answer recorded.
    let coder = Signer {
        encrypt_key: Some(CODER_KEY.into()),
        token: CODER_TOKEN.into(),
    };
    let asked_coder = Msg::group("om_log_code", ASKED_CODER).mentioning("ou_bot_coder", "Coder");
    let r = post("coder", "event", &coder.deliver(&asked_coder));
    assert_eq!(r.await.expect("sent").status(), 200);
    served
        .wait_for_line("the coder's turn", |l| {
            l.contains("turn finished") && l.contains("om_log_code")
        })
        .await;

    // The operating routes, and card presses on the planner's turn by both URLs.
    let turns: Value = client
        .get(format!("{base}/turns?profile=planner&verbose=true"))
        .bearer_auth(ADMIN_TOKEN)
        .send()
        .await
        .expect("sent")
        .json()
        .await
        .expect("JSON");
    let turn_id = turns["turns"][0]["turn_id"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(turns.to_string().contains(ANSWER[1]), "{turns}");
    assert_eq!(
        post("planner", "event", &press(&turn_id))
            .await
            .expect("sent")
            .status(),
        200
    );
    let legacy = post("planner", "card", &legacy_press(&turn_id));
    assert_eq!(legacy.await.expect("sent").status(), 200);
    let status = client
        .get(format!("{base}/status"))
        .bearer_auth(ADMIN_TOKEN)
        .send();
    assert_eq!(status.await.expect("sent").status(), 200);
    web_view(&base).await;

    let (exit, logs) = served.stop();
    assert!(exit.success(), "serve exits 0 on SIGTERM, got {exit:?}");
    for sign in ["turn finished", "card action", "om_log_plan", "om_log_code"] {
        assert!(
            logs.contains(sign),
            "the logs lack {sign:?}: trace output was not captured"
        );
    }
    let agent_key = String::from_utf8_lossy(AGENT_KEY);
    let mut never = vec![
        ADMIN_TOKEN,
        "wrong-web-view-token",
        APP_SECRET,
        LLM_KEY,
        CODER_KEY,
        CODER_TOKEN,
        agent_secret.as_str(),
        agent_secret.trim_start_matches("whsec_"),
        &agent_key,
        DIGEST_KEY,
        PG_PASSWORD,
        feishu::ENCRYPT_KEY,
        feishu::TOKEN,
        // The fake's tenant access tokens (`t-fake-<n>`): a credential the bridge obtains.
        "t-fake-",
        ASKED,
        ASKED_CODER,
        CARD_NOTE,
        LEGACY_NOTE,
    ];
    never.extend(ANSWER);
    for secret in never {
        assert!(!logs.contains(secret), "{secret:?} reached the logs");
    }
}
both_backends!(
    full_turns_at_trace_log_no_secret_or_text,
    full_turns_leave_no_secret_or_text_in_trace_logs
);
