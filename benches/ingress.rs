//! CPU cost of the webhook ingress path on one typical event.
//!
//! One ~1.5 KB `im.message.receive_v1` event is built, encrypted and signed once; then
//!
//! * `verify_and_parse`: `verify_event` (signature over the raw body, AES-256-CBC
//!   decrypt, envelope parse, token check) followed by the typed `events::parse`, i.e.
//!   everything the handler does before it hands the event to the committer;
//! * `aes_decrypt`: `crypto::decrypt` of the same `encrypt` field alone (base64 + CBC);
//! * `sha256_signature`: `crypto::event_signature` over the same body bytes alone.
//!
//! Run with `cargo bench --bench ingress` (add `-- --quick` for a short run).

use std::{hint::black_box, time::Duration};

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use feishu_bridge::protocol::{
    Credentials, Freshness, SignedHeaders, Verified,
    crypto::{self, AesKey},
    events::{self, TypedEvent},
    verify,
};

#[path = "../bench/sample_event.rs"]
mod sample_event;

use sample_event::{Sample, sample_event};

const ENCRYPT_KEY: &str = "kx9Vq2LmT7pR4sW1";
const TOKEN: &str = "rvaYgkND1GOiu5MM0E1rncYC6PLtF7JV";
const TIMESTAMP: &str = "1735689601";
const NONCE: &str = "1483022615";

/// A group text message that @-mentions the bot and one person, with a paragraph of
/// text: about 1.5 KB of plaintext, which is typical for a chat message callback.
fn plaintext() -> String {
    sample_event(&Sample {
        event_id: "5e3702a84e847582be8db7fb73283c02",
        message_id: "om_5ce6d572455d361153b7cb51da133945",
        chat_id: "oc_5ce6d572455d361153b7aa51da133945",
        sender: (
            "on_8ed6aa67826108097d9ee143816345aa",
            "e33ggbyz",
            "ou_84aad35d084aa403a838cf73ee18467a",
        ),
        token: TOKEN,
        app_id: "cli_a1b2c3d4e5f60718",
        create_time_ms: "1735689600123",
        text: "@_user_1 @_user_2 please run the integration tests on the release branch \
               again, the flaky websocket case failed twice this morning. If it fails \
               again, collect the server and worker logs and summarise what changed \
               since yesterday's green build. 谢谢! 发布前需要确认。",
    })
}

struct Fixture {
    key: AesKey,
    encrypted: String,
    body: Vec<u8>,
    signature: String,
}

fn fixture() -> Fixture {
    let key = AesKey::derive(ENCRYPT_KEY);
    let plain = plaintext();
    let encrypted = crypto::encrypt(&key, [0x5a; 16], plain.as_bytes());
    let body = serde_json::json!({ "encrypt": encrypted })
        .to_string()
        .into_bytes();
    let signature = crypto::event_signature(TIMESTAMP, NONCE, ENCRYPT_KEY, &body);
    Fixture {
        key,
        encrypted,
        body,
        signature,
    }
}

fn ingress(c: &mut Criterion) {
    let f = fixture();
    let creds = Credentials {
        encrypt: Some((ENCRYPT_KEY, &f.key)),
        verification_token: TOKEN,
    };
    let headers = SignedHeaders {
        timestamp: Some(TIMESTAMP),
        nonce: Some(NONCE),
        signature: Some(&f.signature),
    };
    // The freshness check is part of the path; keep it on with a window that fits.
    let freshness = Freshness {
        now_secs: 1_735_689_601,
        tolerance_secs: 3600,
    };

    // The fixture must take the real path, or the numbers mean nothing.
    match verify::verify_event(creds, headers, &f.body, freshness) {
        Ok(Verified::Event(e)) => {
            assert_eq!(e.event_type, events::MESSAGE_RECEIVE);
            assert!(matches!(
                events::parse(&e.event_type, &e.payload),
                Ok(TypedEvent::MessageReceive(_))
            ));
        }
        other => panic!("fixture does not verify: {other:?}"),
    }

    let mut group = c.benchmark_group("ingress");
    group
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3))
        .throughput(Throughput::Bytes(f.body.len() as u64));

    group.bench_function("verify_and_parse", |b| {
        b.iter(|| {
            let verified = verify::verify_event(creds, headers, black_box(&f.body), freshness).ok();
            match verified {
                Some(Verified::Event(e)) => events::parse(&e.event_type, &e.payload).is_ok(),
                _ => false,
            }
        });
    });

    // The decrypt sees the base64 `encrypt` field, not the JSON around it.
    group.throughput(Throughput::Bytes(f.encrypted.len() as u64));
    group.bench_function("aes_decrypt", |b| {
        b.iter(|| crypto::decrypt(&f.key, black_box(&f.encrypted)).map(|p| p.len()));
    });

    group.throughput(Throughput::Bytes(f.body.len() as u64));
    group.bench_function("sha256_signature", |b| {
        b.iter(|| crypto::event_signature(TIMESTAMP, NONCE, ENCRYPT_KEY, black_box(&f.body)));
    });

    group.finish();
    eprintln!(
        "fixture: plaintext {} B, body {} B",
        plaintext().len(),
        f.body.len()
    );
}

criterion_group!(benches, ingress);
criterion_main!(benches);
