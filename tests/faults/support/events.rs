//! The callbacks the harness sends: realistic `im.message.receive_v1` events (the
//! benchmark's sample, ~1.5 KB), encrypted and signed as Feishu does it, each delivery
//! with a fresh timestamp, nonce and IV. An event is either observed (it mentions another
//! bot and a person) or an @-request to the bridge's bot that starts its own topic.

use feishu_bridge::protocol::crypto;
use rand::Rng;

#[path = "../../../bench/sample_event.rs"]
mod sample_event;

use sample_event::{Sample, sample_event};

/// The profile's credentials, as both the bridge config and the sender use them.
#[derive(Debug, Clone)]
pub struct Keys {
    /// Profile name (the URL segment).
    pub profile: &'static str,
    /// App id.
    pub app_id: &'static str,
    /// App secret (for the tenant token at the fake Open API).
    pub app_secret: &'static str,
    /// Encrypt Key.
    pub encrypt_key: &'static str,
    /// Verification Token.
    pub token: &'static str,
    /// The bot's open_id.
    pub bot: &'static str,
}

/// The one profile every scenario runs.
pub const KEYS: Keys = Keys {
    profile: "planner",
    app_id: "cli_faults_planner",
    app_secret: "faults-app-secret",
    encrypt_key: "faults-encrypt-key-5e1d",
    token: "faults-verification-token",
    bot: "ou_faults_bot",
};

/// One event: its ids and its plaintext.
#[derive(Debug, Clone)]
pub struct Event {
    /// Position in the run.
    pub seq: u64,
    /// `header.event_id`.
    pub event_id: String,
    /// `event.message.message_id`.
    pub message_id: String,
    /// An @-request to the bot (a turn), or an observed message.
    pub request: bool,
    plaintext: String,
}

/// One delivery of an event: the headers and body Feishu would POST.
pub struct Delivery {
    /// `X-Lark-Request-Timestamp`.
    pub timestamp: String,
    /// `X-Lark-Request-Nonce`.
    pub nonce: String,
    /// `X-Lark-Signature`.
    pub signature: String,
    /// `{"encrypt":"…"}`.
    pub body: String,
}

/// Makes the events of one run: ids unique to the run, in `chats` group chats.
#[derive(Debug, Clone)]
pub struct EventGen {
    run: u32,
    chats: u64,
    /// Every `request_every`-th event is an @-request (0: none).
    request_every: u64,
}

impl EventGen {
    /// Events in `chats` chats, one in `request_every` an @-request.
    pub fn new(chats: u64, request_every: u64) -> Self {
        Self {
            run: rand::rng().random(),
            chats: chats.max(1),
            request_every,
        }
    }

    /// Event number `seq`.
    pub fn event(&self, seq: u64) -> Event {
        let id = format!("{:08x}{:024x}", self.run, seq);
        let request = self.request_every > 0 && seq % self.request_every == self.request_every - 1;
        let chat = seq % self.chats;
        let sender = seq % 64;
        let now_ms = feishu_bridge::util::now_ms().to_string();
        let message_id = format!("om_{id}");
        let plaintext = sample_event(&Sample {
            event_id: &id,
            message_id: &message_id,
            chat_id: &format!("oc_faults_chat_{chat:04}"),
            sender: (
                &format!("on_faults_sender_{sender:04}"),
                &format!("u_faults_{sender:04}"),
                &format!("ou_faults_sender_{sender:04}"),
            ),
            token: KEYS.token,
            app_id: KEYS.app_id,
            create_time_ms: &now_ms,
            text: "@_user_1 @_user_2 please summarise the discussion above into three \
                   action items with owners and due dates. 谢谢!",
        });
        let plaintext = if request {
            addressed_to_bot(&plaintext)
        } else {
            plaintext
        };
        Event {
            seq,
            event_id: id,
            message_id,
            request,
            plaintext,
        }
    }
}

/// The sample turned into a request: its first mention (a bot) is ours, and the message
/// starts a topic of its own (no root to fetch from the Open API).
fn addressed_to_bot(event: &str) -> String {
    let mut value: serde_json::Value = serde_json::from_str(event).expect("sample is JSON");
    let message = &mut value["event"]["message"];
    message["mentions"][0]["id"]["open_id"] = KEYS.bot.into();
    if let Some(fields) = message.as_object_mut() {
        for key in ["root_id", "parent_id", "thread_id"] {
            fields.remove(key);
        }
    }
    value.to_string()
}

impl Event {
    /// A fresh delivery: now's timestamp, a random nonce and IV.
    pub fn delivery(&self) -> Delivery {
        let mut rng = rand::rng();
        let timestamp = feishu_bridge::util::now_secs().to_string();
        let nonce = rng.random::<u64>().to_string();
        let (body, signature) = crypto::seal(
            Some(KEYS.encrypt_key),
            &timestamp,
            &nonce,
            rng.random(),
            &self.plaintext,
        );
        Delivery {
            timestamp,
            nonce,
            signature,
            body,
        }
    }
}
