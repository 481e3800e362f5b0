//! `longconn::fragments`: reassembly under any `sum`, `seq`, message id, order, timing
//! and size, against a plain model of the rules in the module's documentation.

use std::{collections::BTreeMap, time::Duration};

use feishu_bridge::longconn::{FragmentError, FragmentLimits, Fragments};
use proptest::{collection::vec, prelude::*, sample::select};
use serde_json::Value;
use tokio::time::Instant;

use crate::{
    regressions,
    support::{corpus, fuzz},
};

const REGRESSIONS: &str = regressions!("fragments");

/// Small enough that random traffic hits every limit.
const LIMITS: FragmentLimits = FragmentLimits {
    max_messages: 3,
    max_bytes: 32,
    max_parts: 5,
    expiry: Duration::from_secs(10),
};

/// One step of traffic.
#[derive(Debug, Clone)]
enum Op {
    /// A fragment arriving `after_ms` after the previous step.
    Add {
        id: String,
        sum: usize,
        seq: usize,
        payload: Vec<u8>,
        after_ms: u64,
    },
    /// An expiry sweep `after_ms` after the previous step.
    Expire { after_ms: u64 },
}

fn op() -> impl Strategy<Value = Op> {
    let id = select(vec!["a", "b", "c", "d", ""]).prop_map(str::to_string);
    let sum = prop_oneof![8 => 0..7usize, 1 => any::<usize>()];
    let seq = prop_oneof![8 => 0..8usize, 1 => any::<usize>()];
    let after = || prop_oneof![3 => 0..50u64, 1 => 0..6_000u64];
    prop_oneof![
        9 => (id, sum, seq, vec(any::<u8>(), 0..12), after()).prop_map(
            |(id, sum, seq, payload, after_ms)| Op::Add { id, sum, seq, payload, after_ms }
        ),
        1 => after().prop_map(|after_ms| Op::Expire { after_ms }),
    ]
}

/// A waiting message: when its first part came, and one slot per part.
type Waiting = (Instant, Vec<Option<Vec<u8>>>);

/// The rules written plainly: a message is given up `expiry` after its first part, and
/// whole only when every slot is filled (so a message from an incomplete set of parts
/// cannot match it).
#[derive(Default)]
struct Model {
    pending: BTreeMap<String, Waiting>,
}

impl Model {
    fn bytes(&self) -> usize {
        let parts = self.pending.values().flat_map(|(_, p)| p.iter().flatten());
        parts.map(Vec::len).sum()
    }

    fn expire(&mut self, now: Instant) -> usize {
        let before = self.pending.len();
        self.pending
            .retain(|_, (first, _)| now.saturating_duration_since(*first) < LIMITS.expiry);
        before - self.pending.len()
    }

    fn add(
        &mut self,
        id: &str,
        sum: usize,
        seq: usize,
        payload: &[u8],
        now: Instant,
    ) -> Result<Option<Vec<u8>>, FragmentError> {
        self.expire(now);
        let max = LIMITS.max_parts;
        match () {
            () if sum == 0 => return Err(FragmentError::NoParts),
            () if sum > max => return Err(FragmentError::TooManyParts { sum, max }),
            () if seq >= sum => return Err(FragmentError::SeqOutOfRange { seq, sum }),
            () => {}
        }
        let held = self.pending.get(id).map(|(_, parts)| parts);
        if let Some(parts) = held.filter(|p| p.len() != sum) {
            let held = parts.len();
            return Err(FragmentError::SumChanged { held, sum });
        }
        if sum == 1 {
            return Ok(Some(payload.to_vec()));
        }
        let replaced = held.and_then(|p| p[seq].as_ref()).map_or(0, Vec::len);
        if self.bytes() - replaced + payload.len() > LIMITS.max_bytes {
            let max = LIMITS.max_bytes;
            return Err(FragmentError::TooManyBytes { max });
        }
        if held.is_none() && self.pending.len() >= LIMITS.max_messages {
            let max = LIMITS.max_messages;
            return Err(FragmentError::TooManyMessages { max });
        }
        let (_, parts) = self
            .pending
            .entry(id.to_string())
            .or_insert_with(|| (now, vec![None; sum]));
        parts[seq] = Some(payload.to_vec());
        if parts.iter().any(Option::is_none) {
            return Ok(None);
        }
        let (_, parts) = self.pending.remove(id).expect("just completed");
        Ok(Some(parts.into_iter().flatten().flatten().collect()))
    }
}

/// Corpus traffic: `[id, sum, seq, "payload", after_ms]` per fragment.
fn seeds() -> Vec<Vec<Op>> {
    let op = |v: &Value| Op::Add {
        id: v[0].as_str().expect("id").to_string(),
        sum: v[1].as_u64().expect("sum") as usize,
        seq: v[2].as_u64().expect("seq") as usize,
        payload: v[3].as_str().expect("payload").as_bytes().to_vec(),
        after_ms: v[4].as_u64().expect("after_ms"),
    };
    let entries = corpus("fragments");
    let ops = |e: &Value| e["ops"].as_array().expect("ops").iter().map(op).collect();
    entries.iter().map(ops).collect()
}

#[test]
fn reassembly_of_any_traffic_matches_the_documented_rules() {
    fuzz(REGRESSIONS, seeds(), vec(op(), 0..80), |ops| {
        let (mut real, mut model) = (Fragments::new(LIMITS), Model::default());
        let mut now = Instant::now();
        for op in ops {
            match op {
                Op::Add {
                    id,
                    sum,
                    seq,
                    payload,
                    after_ms,
                } => {
                    now += Duration::from_millis(after_ms);
                    let want = model.add(&id, sum, seq, &payload, now);
                    let got = real.add(&id, sum, seq, payload, now);
                    prop_assert_eq!(got, want, "{} {}/{}", id, seq, sum);
                }
                Op::Expire { after_ms } => {
                    now += Duration::from_millis(after_ms);
                    prop_assert_eq!(real.expire(now), model.expire(now));
                }
            }
            prop_assert_eq!(
                (real.len(), real.bytes()),
                (model.pending.len(), model.bytes())
            );
            prop_assert!(real.len() <= LIMITS.max_messages && real.bytes() <= LIMITS.max_bytes);
            prop_assert_eq!(real.is_empty(), model.pending.is_empty());
        }
        Ok(())
    });
}

#[test]
fn a_message_split_any_way_and_sent_in_any_order_comes_out_whole_once() {
    let inputs = (
        vec(any::<u8>(), 0..300),
        vec(any::<usize>(), 0..63),
        vec(any::<u32>(), 64),
        vec(any::<usize>(), 0..4),
    );
    fuzz(
        REGRESSIONS,
        vec![],
        inputs,
        |(whole, cuts, order, resent)| {
            let mut at: Vec<usize> = cuts.iter().map(|c| c % (whole.len() + 1)).collect();
            at.extend([0, whole.len()]);
            at.sort_unstable();
            let parts: Vec<&[u8]> = at.windows(2).map(|w| &whole[w[0]..w[1]]).collect();
            let sum = parts.len();
            // Every part once, in a random order, with a few sent twice before the last.
            let mut sends: Vec<usize> = (0..sum).collect();
            sends.sort_by_key(|&seq| order[seq]);
            let last = sends.pop().expect("at least one part");
            sends.extend(resent.iter().map(|r| r % sum).filter(|&s| s != last));
            sends.push(last);
            let mut f = Fragments::new(FragmentLimits::default());
            let now = Instant::now();
            let (done, rest) = sends.split_last().expect("sends");
            for &seq in rest {
                let got = f.add("m", sum, seq, parts[seq].to_vec(), now);
                prop_assert_eq!(got, Ok(None), "part {} of {} completed early", seq, sum);
            }
            let got = f.add("m", sum, *done, parts[*done].to_vec(), now);
            prop_assert_eq!(got, Ok(Some(whole)));
            prop_assert!(f.is_empty() && f.bytes() == 0, "{:?}", f);
            Ok(())
        },
    );
}
