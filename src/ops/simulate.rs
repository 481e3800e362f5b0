//! `feishu-bridge simulate`: signs and encrypts realistic Feishu events with each
//! profile's own keys and posts them to a running bridge, the way Feishu would — then
//! prints the explain report of the resulting decision. The way to try a deployment end
//! to end without a Feishu app.

use std::{path::Path, time::Duration};

use anyhow::{Context as _, bail};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::{
    config::{Config, Profile},
    protocol::crypto,
    util::{now_ms, now_secs},
};

/// One message to deliver.
#[derive(Debug, Clone, Deserialize, Default)]
#[serde(deny_unknown_fields, default)]
pub struct Step {
    /// Message id (generated when absent).
    pub id: Option<String>,
    pub chat: Option<String>,
    /// Thread root: the message is a reply in that thread.
    pub root: Option<String>,
    /// Sender open_id.
    pub sender: Option<String>,
    /// `user` (default) or `app`.
    pub sender_type: Option<String>,
    /// A private chat with this profile instead of a group message.
    pub dm: bool,
    /// Text; `@<profile>` mentions that profile's bot.
    pub text: String,
    /// Profiles that receive it (default: every profile, as every bot in a group does).
    pub to: Vec<String>,
}

/// A scenario file: `[[step]]` tables, delivered in order.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    /// The steps.
    pub step: Vec<Step>,
}

/// Where and how to post.
#[derive(Debug)]
pub struct Target<'a> {
    /// Bridge base URL.
    pub url: String,
    /// The config whose profiles' keys sign the events.
    pub config: &'a Config,
    /// Print the verbose report.
    pub verbose: bool,
    /// The HTTP client for every step.
    pub http: reqwest::Client,
}

impl<'a> Target<'a> {
    /// A target at `url`, signing with `config`'s profiles.
    pub fn new(url: String, config: &'a Config, verbose: bool) -> anyhow::Result<Self> {
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(15))
            .build()?;
        Ok(Self {
            url,
            config,
            verbose,
            http,
        })
    }

    /// GETs `path` from the bridge with the admin token.
    async fn get(&self, path: &str, accept: &'static str) -> reqwest::Result<reqwest::Response> {
        let admin = self.config.server.admin_token().unwrap_or_default();
        self.http
            .get(format!("{}{path}", self.url))
            .bearer_auth(admin)
            .header("accept", accept)
            .send()
            .await
    }
}

fn bot_id(p: &Profile) -> String {
    p.bot_open_id
        .clone()
        .unwrap_or_else(|| format!("ou_bot_{}", p.name))
}

/// The `im.message.receive_v1` event of a step, as `profile` receives it.
fn event(config: &Config, step: &Step, message_id: &str) -> (Value, Vec<String>) {
    let mut mentions = Vec::new();
    let mut mentioned = Vec::new();
    let mut words = Vec::new();
    for word in step.text.split(' ') {
        let name = word
            .strip_prefix('@')
            .map(|n| n.trim_end_matches([',', '.', ':', '!', '?']));
        match name.and_then(|n| config.profile(n)) {
            Some(p) => {
                let key = format!("@_user_{}", mentions.len() + 1);
                mentions.push(json!({"key": key, "id": {"open_id": bot_id(p), "union_id": "", "user_id": ""},
                                     "name": p.name, "mentioned_type": "bot", "tenant_key": "simulated"}));
                mentioned.push(p.name.clone());
                words.push(key);
            }
            None => words.push(word.to_string()),
        }
    }
    let chat = step.chat.clone().unwrap_or_else(|| {
        if step.dm {
            "oc_simulated_dm".into()
        } else {
            "oc_simulated".into()
        }
    });
    let sender = step
        .sender
        .clone()
        .unwrap_or_else(|| "ou_simulated_user".into());
    let ev = json!({
        "sender": {"sender_id": {"open_id": sender, "union_id": format!("on_{sender}"), "user_id": ""},
                   "sender_type": step.sender_type.clone().unwrap_or_else(|| "user".into()), "tenant_key": "simulated"},
        "message": {
            "message_id": message_id,
            "root_id": step.root,
            "parent_id": step.root,
            "thread_id": step.root.as_ref().map(|r| format!("omt_{r}")),
            "create_time": now_ms().to_string(),
            "chat_id": chat,
            "chat_type": if step.dm { "p2p" } else { "group" },
            "message_type": "text",
            "content": json!({"text": words.join(" ")}).to_string(),
            "mentions": mentions,
        }
    });
    (ev, mentioned)
}

/// Signs (and encrypts, when the profile has a key) one callback body.
fn signed(profile: &Profile, plaintext: &str) -> (String, [(String, String); 3]) {
    let ts = now_secs().to_string();
    let nonce = format!("{}", rand::random::<u32>());
    let (body, sig) = crypto::seal(
        profile.encrypt_key(),
        &ts,
        &nonce,
        rand::random(),
        plaintext,
    );
    (
        body,
        [
            ("X-Lark-Request-Timestamp".into(), ts),
            ("X-Lark-Request-Nonce".into(), nonce),
            ("X-Lark-Signature".into(), sig),
        ],
    )
}

/// Delivers one step and returns the explain report (or the verdicts when no bot was
/// invoked).
pub async fn deliver(t: &Target<'_>, step: &Step) -> anyhow::Result<String> {
    let message_id = step
        .id
        .clone()
        .unwrap_or_else(|| format!("om_sim_{:016x}", rand::random::<u64>()));
    let (ev, mentioned) = event(t.config, step, &message_id);
    let targets = recipients(t.config, step, &mentioned);
    if targets.is_empty() {
        bail!("no profile to deliver to");
    }
    let mut notes = String::new();
    for p in &targets {
        if post(t, p, &message_id, &ev).await? == Outcome::Duplicate {
            notes.push_str(&format!(
                "{}: the bridge answered ev_{message_id} as a duplicate: it was stored before, so nothing new runs (give the step another id)\n",
                p.name
            ));
        }
    }
    let verdicts = settled_verdicts(t, &message_id, targets.len()).await?;
    let root = step.root.as_deref().unwrap_or(&message_id);
    let mut out = String::new();
    for v in verdicts["verdicts"].as_array().into_iter().flatten() {
        out.push_str(&verdict_report(t, v, root, &message_id).await?);
    }
    if out.is_empty() {
        out.push_str(&format!("{message_id}: no verdict yet\n"));
    }
    Ok(format!("== {message_id}: {}\n{notes}{out}", step.text))
}

/// The profiles that receive a step: those it names, else in a private chat the one
/// mentioned (or the first), else every profile, as every bot in a group does.
fn recipients<'c>(config: &'c Config, step: &Step, mentioned: &[String]) -> Vec<&'c Profile> {
    if !step.to.is_empty() {
        return step.to.iter().filter_map(|n| config.profile(n)).collect();
    }
    if step.dm {
        return mentioned
            .first()
            .and_then(|n| config.profile(n))
            .into_iter()
            .chain(config.profiles.first())
            .take(1)
            .collect();
    }
    config.profiles.iter().collect()
}

/// How the bridge took a posted event.
#[derive(Debug, PartialEq, Eq)]
enum Outcome {
    /// Stored now.
    Stored,
    /// Stored before: nothing new runs.
    Duplicate,
}

/// Posts the event `ev` of a message to `p`'s event URL, signed (and encrypted) with
/// its keys, as Feishu would.
async fn post(
    t: &Target<'_>,
    p: &Profile,
    message_id: &str,
    ev: &Value,
) -> anyhow::Result<Outcome> {
    let plaintext = json!({
        "schema": "2.0",
        "header": {"event_id": format!("ev_{message_id}"), "token": p.verification_token(),
                   "create_time": now_ms().to_string(), "event_type": "im.message.receive_v1",
                   "tenant_key": "simulated", "app_id": p.app_id},
        "event": ev,
    })
    .to_string();
    let (body, headers) = signed(p, &plaintext);
    let mut req = t
        .http
        .post(format!("{}/webhook/{}/event", t.url, p.name))
        .header("content-type", "application/json; charset=utf-8")
        .body(body);
    for (k, v) in headers {
        req = req.header(k, v);
    }
    let resp = req
        .send()
        .await
        .with_context(|| format!("cannot reach {}", t.url))?;
    let status = resp.status();
    if !status.is_success() {
        bail!(
            "{} answered {status}: {}",
            p.name,
            resp.text().await.unwrap_or_default()
        );
    }
    let outcome = resp
        .headers()
        .get(crate::inbox::OUTCOME_HEADER)
        .and_then(|v| v.to_str().ok());
    Ok(match outcome {
        Some("duplicate") => Outcome::Duplicate,
        _ => Outcome::Stored,
    })
}

/// The message's verdicts, once (bounded wait) every target routed it and no turn is
/// queued or running, so the next step sees this one's answers.
async fn settled_verdicts(
    t: &Target<'_>,
    message_id: &str,
    targets: usize,
) -> anyhow::Result<Value> {
    let mut verdicts = Value::Null;
    for _ in 0..100 {
        let v = t
            .get(
                &format!("/explain/message/{message_id}"),
                "application/json",
            )
            .await?;
        if v.status().is_success() {
            verdicts = v.json().await?;
            let status: Value = t.get("/status", "application/json").await?.json().await?;
            let idle = status["turns"]["queued"] == 0 && status["turns"]["running"] == 0;
            if verdicts["verdicts"].as_array().map_or(0, Vec::len) >= targets && idle {
                break;
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Ok(verdicts)
}

/// One profile's verdict, and the explain report of its decision when it made one.
async fn verdict_report(
    t: &Target<'_>,
    v: &Value,
    root: &str,
    message_id: &str,
) -> anyhow::Result<String> {
    let profile = v["profile"].as_str().unwrap_or_default();
    let mut out = format!(
        "{} → {} ({})\n",
        profile,
        v["verdict"].as_str().unwrap_or_default(),
        v["reason"].as_str().unwrap_or_default()
    );
    if v["decision_id"].is_i64() {
        let path = format!(
            "/explain/{root}?profile={profile}&message_id={message_id}&verbose={}",
            t.verbose
        );
        let report = t.get(&path, "text/plain").await?.text().await?;
        out.push('\n');
        out.push_str(&report);
    }
    Ok(out)
}

/// Runs a scenario file, step by step.
pub async fn run_scenario(t: &Target<'_>, path: &Path) -> anyhow::Result<String> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    let scenario: Scenario =
        toml::from_str(&text).with_context(|| format!("{} is not a scenario", path.display()))?;
    let mut out = String::new();
    for step in &scenario.step {
        out.push_str(&deliver(t, step).await?);
        out.push('\n');
    }
    Ok(out)
}

/// The bridge URL from the config's listen address.
pub fn default_url(config: &Config) -> String {
    let addr = config.server.listen_addr();
    let host = if addr.ip().is_unspecified() {
        "127.0.0.1".to_string()
    } else {
        addr.ip().to_string()
    };
    format!("http://{host}:{}", addr.port())
}
