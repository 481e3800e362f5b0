//! Builds callbacks the way Feishu sends them: schema 2.0 JSON, AES-256-CBC encrypted,
//! SHA-256 signed over the exact body bytes.

use feishu_bridge::protocol::crypto;
use serde_json::{Value, json};

/// Test credentials of the default profile.
pub const ENCRYPT_KEY: &str = "test-encrypt-key-0123";
/// Test verification token of the default profile.
pub const TOKEN: &str = "test-verification-token";
/// App id of the default profile.
pub const APP_ID: &str = "cli_test_planner";
/// The default profile's bot.
pub const BOT_OPEN_ID: &str = "ou_bot_planner";

/// One HTTP request: body plus headers.
#[derive(Debug, Clone)]
pub struct Request {
    /// Exact body bytes.
    pub body: String,
    /// Extra headers.
    pub headers: Vec<(String, String)>,
}

/// Signs and (optionally) encrypts callbacks for one profile.
#[derive(Debug, Clone)]
pub struct Signer {
    /// Encrypt Key, when the profile has one.
    pub encrypt_key: Option<String>,
    /// Verification Token written into envelopes.
    pub token: String,
}

/// A second bot, `coder`, as a `[[profiles]]` table to append to a test config (its
/// replies are recorded, not sent).
pub const CODER_PROFILE: &str = r#"
[[profiles]]
name = "coder"
app_id = "cli_test_coder"
encrypt_key = "coder-key"
verification_token = "coder-token"
bot_open_id = "ou_bot_coder"
dry_run = true
"#;

impl Signer {
    /// The signer of [`CODER_PROFILE`].
    pub fn coder() -> Self {
        Self {
            encrypt_key: Some("coder-key".into()),
            token: "coder-token".into(),
        }
    }
}

impl Default for Signer {
    fn default() -> Self {
        Self {
            encrypt_key: Some(ENCRYPT_KEY.into()),
            token: TOKEN.into(),
        }
    }
}

/// Now, Unix seconds, as Feishu's header carries it.
pub fn now_secs() -> i64 {
    feishu_bridge::util::now_secs()
}

/// Now, Unix milliseconds, as Feishu writes a message's `create_time`.
pub fn now_ms() -> i64 {
    feishu_bridge::util::now_ms()
}

impl Signer {
    /// A schema 2.0 envelope around `event`.
    pub fn envelope(&self, event_id: &str, event_type: &str, event: Value) -> String {
        json!({
            "schema": "2.0",
            "header": {
                "event_id": event_id,
                "token": self.token,
                "create_time": (now_secs() * 1000).to_string(),
                "event_type": event_type,
                "tenant_key": "tenant_test",
                "app_id": APP_ID,
            },
            "event": event,
        })
        .to_string()
    }

    /// Encrypts (when keyed) and signs `plaintext` with the current time.
    pub fn request(&self, plaintext: &str) -> Request {
        self.request_at(plaintext, now_secs())
    }

    /// Encrypts (when keyed) and signs `plaintext` with the given timestamp.
    pub fn request_at(&self, plaintext: &str, timestamp: i64) -> Request {
        let ts = timestamp.to_string();
        let nonce = format!("{}", rand::random::<u32>());
        let key = self.encrypt_key.as_deref();
        let (body, sig) = crypto::seal(key, &ts, &nonce, rand::random(), plaintext);
        Request::signed(body, &ts, &nonce, &sig)
    }

    /// A signed `{"encrypt": …}` body whose content is arbitrary (for negative tests).
    pub fn signed_raw_encrypt(&self, encrypt_field: &str) -> Request {
        self.signed_body(json!({ "encrypt": encrypt_field }).to_string())
    }

    /// `body` exactly as given, signed (for negative tests).
    pub fn signed_body(&self, body: String) -> Request {
        let key = self.encrypt_key.as_deref().unwrap_or_default();
        let ts = now_secs().to_string();
        let sig = crypto::event_signature(&ts, "1", key, body.as_bytes());
        Request::signed(body, &ts, "1", &sig)
    }

    /// A complete `im.message.receive_v1` group text message mentioning the bot.
    pub fn message(&self, event_id: &str, message_id: &str, text: &str) -> Request {
        self.request(&self.envelope(
            event_id,
            "im.message.receive_v1",
            message_event(message_id, text),
        ))
    }
}

impl Request {
    /// `rb` with this request's body and headers.
    pub fn apply(&self, rb: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
        self.headers
            .iter()
            .fold(rb.body(self.body.clone()), |rb, (k, v)| rb.header(k, v))
    }

    fn signed(body: String, ts: &str, nonce: &str, sig: &str) -> Self {
        Self {
            body,
            headers: vec![
                (
                    "content-type".into(),
                    "application/json; charset=utf-8".into(),
                ),
                ("x-lark-request-timestamp".into(), ts.into()),
                ("x-lark-request-nonce".into(), nonce.into()),
                ("x-lark-signature".into(), sig.into()),
            ],
        }
    }

    /// The same request without the signature headers.
    pub fn unsigned(mut self) -> Self {
        self.headers.retain(|(k, _)| !k.starts_with("x-lark"));
        self
    }

    /// Replaces one header.
    pub fn with_header(mut self, name: &str, value: &str) -> Self {
        self.headers.retain(|(k, _)| k != name);
        self.headers.push((name.into(), value.into()));
        self
    }
}

/// `event` of a group text message that @-mentions the bot.
pub fn message_event(message_id: &str, text: &str) -> Value {
    json!({
        "sender": {
            "sender_id": {"union_id": "on_alice", "user_id": "alice", "open_id": "ou_alice"},
            "sender_type": "user",
            "tenant_key": "tenant_test"
        },
        "message": {
            "message_id": message_id,
            "create_time": now_ms().to_string(),
            "chat_id": "oc_group",
            "chat_type": "group",
            "message_type": "text",
            "content": json!({"text": format!("@_user_1 {text}")}).to_string(),
            "mentions": [{
                "key": "@_user_1",
                "id": {"open_id": BOT_OPEN_ID, "union_id": "on_bot", "user_id": ""},
                "name": "Planner",
                "mentioned_type": "bot",
                "tenant_key": "tenant_test"
            }]
        }
    })
}

/// A message as Feishu delivers it in `im.message.receive_v1`, built up step by step.
#[derive(Debug, Clone)]
pub struct Msg {
    /// `om_…`
    pub message_id: String,
    /// `oc_…`
    pub chat_id: String,
    /// `group` or `p2p`.
    pub chat_type: String,
    /// Sender open_id.
    pub sender: String,
    /// `user`, `bot` or `app`.
    pub sender_type: String,
    /// `text`, `post`, `image`, …
    pub message_type: String,
    /// The content object (serialised into the content string).
    pub content: Value,
    /// `mentions[]`.
    pub mentions: Vec<Value>,
    /// Thread root.
    pub root_id: Option<String>,
    /// Thread id.
    pub thread_id: Option<String>,
    /// Quoted message.
    pub parent_id: Option<String>,
    /// `create_time`, Unix ms: when it was built, unless set with [`Msg::at`]. Every
    /// delivery of the message (to each bot) carries the same.
    pub create_time: i64,
}

impl Msg {
    /// A plain group text message from Alice, mentioning nobody.
    pub fn group(message_id: &str, text: &str) -> Self {
        Self {
            message_id: message_id.into(),
            chat_id: "oc_group".into(),
            chat_type: "group".into(),
            sender: "ou_alice".into(),
            sender_type: "user".into(),
            message_type: "text".into(),
            content: json!({ "text": text }),
            mentions: Vec::new(),
            root_id: None,
            thread_id: None,
            parent_id: None,
            create_time: now_ms(),
        }
    }

    /// A private chat message from Alice.
    pub fn dm(message_id: &str, text: &str) -> Self {
        Self {
            chat_id: "oc_dm_alice".into(),
            chat_type: "p2p".into(),
            ..Self::group(message_id, text)
        }
    }

    /// Prefixes the text with an @ of `open_id` (named `name`).
    pub fn mentioning(mut self, open_id: &str, name: &str) -> Self {
        let key = format!("@_user_{}", self.mentions.len() + 1);
        let text = self.content["text"].as_str().unwrap_or_default();
        self.content = json!({ "text": format!("{key} {text}") });
        self.mentions.push(json!({
            "key": key, "id": {"open_id": open_id, "union_id": format!("on_{open_id}"), "user_id": ""},
            "name": name, "mentioned_type": "user", "tenant_key": "tenant_test"
        }));
        self
    }

    /// Prefixes the text with an @ of this test's bot.
    pub fn at_bot(self) -> Self {
        self.mentioning(BOT_OPEN_ID, "Planner")
    }

    /// Sent by someone else.
    pub fn by(mut self, open_id: &str) -> Self {
        self.sender = open_id.into();
        self
    }

    /// Sent by an app (a bot); `open_id` is how this app sees it.
    pub fn by_app(mut self, open_id: &str) -> Self {
        self.sender = open_id.into();
        self.sender_type = "app".into();
        self
    }

    /// In chat `chat_id`.
    pub fn in_chat(mut self, chat_id: &str) -> Self {
        self.chat_id = chat_id.into();
        self
    }

    /// A reply inside the thread rooted at `root`.
    pub fn in_thread(mut self, root: &str) -> Self {
        self.root_id = Some(root.into());
        self.thread_id = Some(format!("omt_{root}"));
        self
    }

    /// A quote-reply to `parent` in the main chat (no thread).
    pub fn quoting(mut self, parent: &str) -> Self {
        self.root_id = Some(parent.into());
        self.parent_id = Some(parent.into());
        self
    }

    /// Said at `ms` (its `create_time`).
    pub fn at(mut self, ms: i64) -> Self {
        self.create_time = ms;
        self
    }

    /// Another content type.
    pub fn typed(mut self, message_type: &str, content: Value) -> Self {
        self.message_type = message_type.into();
        self.content = content;
        self
    }

    /// The `event` object.
    pub fn event(&self) -> Value {
        json!({
            "sender": {
                "sender_id": {"union_id": format!("on_{}", self.sender), "user_id": "", "open_id": self.sender},
                "sender_type": self.sender_type,
                "tenant_key": "tenant_test"
            },
            "message": {
                "message_id": self.message_id,
                "root_id": self.root_id,
                "parent_id": self.parent_id,
                "thread_id": self.thread_id,
                "create_time": self.create_time.to_string(),
                "chat_id": self.chat_id,
                "chat_type": self.chat_type,
                "message_type": self.message_type,
                "content": self.content.to_string(),
                "mentions": self.mentions,
            }
        })
    }
}

impl Signer {
    /// The signed callback carrying `msg` (event id `ev-<message_id>`).
    pub fn deliver(&self, msg: &Msg) -> Request {
        self.request(&self.envelope(
            &format!("ev-{}", msg.message_id),
            "im.message.receive_v1",
            msg.event(),
        ))
    }

    /// The signed recall callback for a message.
    pub fn recall(&self, message_id: &str, chat_id: &str) -> Request {
        let event = json!({"message_id": message_id, "chat_id": chat_id,
                           "recall_time": (now_secs() * 1000).to_string(), "recall_type": "message_owner"});
        self.request(&self.envelope(
            &format!("ev-recall-{message_id}"),
            "im.message.recalled_v1",
            event,
        ))
    }
}
