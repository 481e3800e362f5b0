//! Builds callbacks the way Feishu sends them: schema 2.0 JSON, AES-256-CBC encrypted,
//! SHA-256 signed over the exact body bytes.

use feishu_bridge::protocol::crypto::{self, AesKey};
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
        match &self.encrypt_key {
            Some(key) => {
                let iv: [u8; 16] = rand::random();
                let enc = crypto::encrypt(&AesKey::derive(key), iv, plaintext.as_bytes());
                let body = json!({ "encrypt": enc }).to_string();
                let sig = crypto::event_signature(&ts, &nonce, key, body.as_bytes());
                Request::signed(body, &ts, &nonce, &sig)
            }
            None => {
                let sig = crypto::event_signature(&ts, &nonce, "", plaintext.as_bytes());
                Request::signed(plaintext.to_string(), &ts, &nonce, &sig)
            }
        }
    }

    /// A signed `{"encrypt": …}` body whose content is arbitrary (for negative tests).
    pub fn signed_raw_encrypt(&self, encrypt_field: &str) -> Request {
        let key = self.encrypt_key.as_deref().unwrap_or_default();
        let body = json!({ "encrypt": encrypt_field }).to_string();
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
            "create_time": (now_secs() * 1000).to_string(),
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
