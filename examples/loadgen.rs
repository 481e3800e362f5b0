//! Pre-generates signed, encrypted `im.message.receive_v1` callbacks for load tests.
//!
//! ```text
//! cargo run --release --example loadgen -- \
//!     --count 100000 --encrypt-key KEY --token TOKEN --out events.tsv [--app-id cli_x] \
//!     [--chat-id oc_x] [--mention-bot ou_x]
//! ```
//!
//! Each line of the output is one request, tab-separated:
//!
//! ```text
//! <X-Lark-Request-Timestamp>\t<X-Lark-Request-Nonce>\t<X-Lark-Signature>\t<body>
//! ```
//!
//! The body is `{"encrypt":"…"}` (base64 never contains a tab or a newline). Every event
//! has its own `event_id` and `message_id` (a random per-run prefix plus a sequence
//! number) and its own random IV, so the bridge stores each one instead of answering it
//! as a duplicate. Plaintexts are about 1.5 KB, like a chat message with two mentions.
//!
//! By default the events are replies in topics of 16 group chats that mention another bot
//! and a person, so a bridge whose bot is neither only observes them. `--chat-id` puts
//! every event in that one chat; `--mention-bot` makes each event a new topic whose first
//! mention is that bot, i.e. a request the bridge routes to its agent.

use std::{
    fs::File,
    io::{BufWriter, Write},
    process::ExitCode,
    time::{Instant, SystemTime, UNIX_EPOCH},
};

use feishu_bridge::protocol::crypto;
use rand::Rng;

#[path = "../bench/sample_event.rs"]
mod sample_event;

use sample_event::{Sample, sample_event};

const USAGE: &str = "usage: loadgen --count N --encrypt-key KEY --token TOKEN --out FILE \
                     [--app-id APP_ID] [--chat-id CHAT_ID] [--mention-bot OPEN_ID]";

struct Args {
    count: u64,
    encrypt_key: String,
    token: String,
    out: String,
    app_id: String,
    /// Every event in this chat instead of 16.
    chat_id: Option<String>,
    /// Every event a new topic addressed to this bot.
    mention_bot: Option<String>,
}

fn parse_args() -> Result<Args, String> {
    let mut count = None;
    let mut encrypt_key = None;
    let mut token = None;
    let mut out = None;
    let mut app_id = "cli_bench".to_string();
    let mut chat_id = None;
    let mut mention_bot = None;
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        if flag == "-h" || flag == "--help" {
            return Err(USAGE.to_string());
        }
        let value = args
            .next()
            .ok_or_else(|| format!("{flag} needs a value\n{USAGE}"))?;
        match flag.as_str() {
            "--count" => {
                count = Some(
                    value
                        .parse::<u64>()
                        .map_err(|_| format!("--count: not a number: {value}"))?,
                );
            }
            "--encrypt-key" => encrypt_key = Some(value),
            "--token" => token = Some(value),
            "--out" => out = Some(value),
            "--app-id" => app_id = value,
            "--chat-id" => chat_id = Some(value),
            "--mention-bot" => mention_bot = Some(value),
            other => return Err(format!("unknown argument {other}\n{USAGE}")),
        }
    }
    let missing = |name: &str| format!("{name} is required\n{USAGE}");
    Ok(Args {
        count: count.ok_or_else(|| missing("--count"))?,
        encrypt_key: encrypt_key
            .filter(|k| !k.is_empty())
            .ok_or_else(|| missing("--encrypt-key"))?,
        token: token
            .filter(|t| !t.is_empty())
            .ok_or_else(|| missing("--token"))?,
        out: out.ok_or_else(|| missing("--out"))?,
        app_id,
        chat_id: chat_id.filter(|c| !c.is_empty()),
        mention_bot: mention_bot.filter(|b| !b.is_empty()),
    })
}

/// A few message texts of similar length, so not every payload is identical.
const TEXTS: [&str; 3] = [
    "@_user_1 @_user_2 please run the integration tests on the release branch again, the \
     flaky websocket case failed twice this morning. If it fails again, collect the server \
     and worker logs and summarise what changed since yesterday's green build. 谢谢! \
     发布前需要确认。",
    "@_user_1 @_user_2 can you review the migration in the open pull request before lunch? \
     It adds an index on the events table and backfills two columns; I'd like a second pair \
     of eyes on the lock it takes and on the rollback path. 麻烦看一下，今天需要合并。",
    "@_user_1 @_user_2 summarise the discussion above into three action items with owners \
     and due dates, then post them in the weekly planning doc. Skip anything already done, \
     and flag whatever still has no owner so we can pick it up in standup. 谢谢大家!",
];

struct Ids {
    run: u32,
    seq: u64,
}

impl Ids {
    /// 32 hex digits: the run prefix, then the sequence number.
    fn hex(&self) -> String {
        format!("{:08x}{:024x}", self.run, self.seq)
    }
}

fn plaintext(ids: &Ids, args: &Args, now_ms: u128) -> String {
    let id = ids.hex();
    let chat = ids.seq % 16;
    let sender = ids.seq % 64;
    let event = sample_event(&Sample {
        event_id: &id,
        message_id: &format!("om_{id}"),
        chat_id: &args
            .chat_id
            .clone()
            .unwrap_or_else(|| format!("oc_5ce6d572455d361153b7aa51da13{chat:04x}")),
        sender: (
            &format!("on_8ed6aa67826108097d9ee1438163{sender:04x}"),
            &format!("u{sender:07x}"),
            &format!("ou_84aad35d084aa403a838cf73ee18{sender:04x}"),
        ),
        token: &args.token,
        app_id: &args.app_id,
        create_time_ms: &now_ms.to_string(),
        text: TEXTS[(ids.seq % TEXTS.len() as u64) as usize],
    });
    match &args.mention_bot {
        Some(bot) => addressed_to(&event, bot),
        None => event,
    }
}

/// The sample event turned into a request to `bot`: its first mention (a bot) is `bot`,
/// and the message starts its own topic, so the turn needs no topic root from the API.
fn addressed_to(event: &str, bot: &str) -> String {
    let Ok(mut value) = serde_json::from_str::<serde_json::Value>(event) else {
        return event.to_string();
    };
    let message = &mut value["event"]["message"];
    message["mentions"][0]["id"]["open_id"] = bot.into();
    if let Some(fields) = message.as_object_mut() {
        for key in ["root_id", "parent_id", "thread_id"] {
            fields.remove(key);
        }
    }
    value.to_string()
}

fn run(args: &Args) -> std::io::Result<()> {
    let started = Instant::now();
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    let timestamp = now.as_secs().to_string();
    let now_ms = now.as_millis();
    let mut rng = rand::rng();
    let run_id: u32 = rng.random();

    let mut out = BufWriter::with_capacity(1 << 20, File::create(&args.out)?);
    let (mut plain_bytes, mut body_bytes) = (0u64, 0u64);
    for seq in 0..args.count {
        let ids = Ids { run: run_id, seq };
        let plain = plaintext(&ids, args, now_ms);
        let nonce = rng.random::<u32>().to_string();
        let (body, signature) = crypto::seal(
            Some(&args.encrypt_key),
            &timestamp,
            &nonce,
            rng.random(),
            &plain,
        );
        writeln!(out, "{timestamp}\t{nonce}\t{signature}\t{body}")?;
        plain_bytes += plain.len() as u64;
        body_bytes += body.len() as u64;
    }
    out.flush()?;
    let n = args.count.max(1);
    eprintln!(
        "loadgen: {} events -> {} (plaintext ~{} B, body ~{} B each) in {:.2?}",
        args.count,
        args.out,
        plain_bytes / n,
        body_bytes / n,
        started.elapsed()
    );
    Ok(())
}

fn main() -> ExitCode {
    let args = match parse_args() {
        Ok(a) => a,
        Err(msg) => {
            eprintln!("{msg}");
            return ExitCode::from(2);
        }
    };
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("loadgen: cannot write {}: {e}", args.out);
            ExitCode::FAILURE
        }
    }
}
