//! Reassembly of messages the server splits across several data frames.
//!
//! Every part carries the headers `message_id` (shared), `sum` (the number of parts) and
//! `seq` (this part's index from 0); an unsplit message has `sum=1`, `seq=0`. Parts may
//! arrive in any order and are joined in `seq` order once all are in. What the buffer
//! holds is bounded in messages, bytes and parts per message, and a message is given up
//! a fixed time after its first part (Node's rule; Go and Python wait 5 s from the latest
//! part, which a trickle of parts can stretch forever). A message given up is not lost:
//! it is never acknowledged, so the server pushes it again.

use std::{collections::HashMap, time::Duration};

use tokio::time::Instant;

/// How much the buffer may hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FragmentLimits {
    /// Split messages waiting for parts at once.
    pub max_messages: usize,
    /// Bytes of parts held, over all messages.
    pub max_bytes: usize,
    /// Parts one message may announce (`sum`).
    pub max_parts: usize,
    /// How long after its first part a message is given up.
    pub expiry: Duration,
}

impl Default for FragmentLimits {
    fn default() -> Self {
        Self {
            max_messages: 64,
            max_bytes: 16 * 1024 * 1024,
            max_parts: 64,
            expiry: Duration::from_secs(10),
        }
    }
}

/// Why a part was refused. The buffer is left as it was.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum FragmentError {
    /// `sum` is 0.
    #[error("a message announced 0 parts")]
    NoParts,
    /// `sum` is over [`FragmentLimits::max_parts`].
    #[error("a message announced {sum} parts, over the limit of {max}")]
    TooManyParts { sum: usize, max: usize },
    /// `seq` is not below `sum`.
    #[error("part {seq} of a message of {sum} parts")]
    SeqOutOfRange { seq: usize, sum: usize },
    /// Another part of the same message announced a different `sum`.
    #[error("a message announced {held} parts and now {sum}")]
    SumChanged { held: usize, sum: usize },
    /// [`FragmentLimits::max_messages`] split messages are already waiting.
    #[error("{max} split messages are already waiting")]
    TooManyMessages { max: usize },
    /// The part would take the held bytes over [`FragmentLimits::max_bytes`].
    #[error("the held parts would exceed {max} bytes")]
    TooManyBytes { max: usize },
}

/// One split message, waiting for parts.
struct Pending {
    first: Instant,
    /// One slot per part, `sum` long.
    parts: Vec<Option<Vec<u8>>>,
    missing: usize,
}

/// The split messages waiting for their parts.
pub struct Fragments {
    limits: FragmentLimits,
    pending: HashMap<String, Pending>,
    bytes: usize,
}

impl std::fmt::Debug for Fragments {
    // Counts only: the parts are users' messages.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Fragments")
            .field("limits", &self.limits)
            .field("messages", &self.pending.len())
            .field("bytes", &self.bytes)
            .finish()
    }
}

impl Fragments {
    /// An empty buffer within `limits`.
    pub fn new(limits: FragmentLimits) -> Self {
        Self {
            limits,
            pending: HashMap::new(),
            bytes: 0,
        }
    }

    /// The whole payload once every part of `message_id` is in (at once when sum == 1);
    /// Ok(None) while parts are missing; Err for a fragment that cannot be taken (seq >=
    /// sum, sum 0 or over max_parts, sum changing for one message_id, the buffer full in
    /// messages or bytes — then nothing already held is corrupted; a repeated seq
    /// replaces the part).
    ///
    /// Expired messages are dropped first, so a late part of one starts it afresh.
    pub fn add(
        &mut self,
        message_id: &str,
        sum: usize,
        seq: usize,
        payload: Vec<u8>,
        now: Instant,
    ) -> Result<Option<Vec<u8>>, FragmentError> {
        self.expire(now);
        let limits = self.limits;
        if sum == 0 {
            return Err(FragmentError::NoParts);
        }
        if sum > limits.max_parts {
            return Err(FragmentError::TooManyParts {
                sum,
                max: limits.max_parts,
            });
        }
        if seq >= sum {
            return Err(FragmentError::SeqOutOfRange { seq, sum });
        }
        let held = self.pending.get(message_id);
        if let Some(p) = held.filter(|p| p.parts.len() != sum) {
            return Err(FragmentError::SumChanged {
                held: p.parts.len(),
                sum,
            });
        }
        if sum == 1 {
            return Ok(Some(payload));
        }
        let replaced = held.and_then(|p| p.parts[seq].as_ref()).map_or(0, Vec::len);
        let bytes = (self.bytes - replaced).saturating_add(payload.len());
        if bytes > limits.max_bytes {
            return Err(FragmentError::TooManyBytes {
                max: limits.max_bytes,
            });
        }
        if held.is_none() && self.pending.len() >= limits.max_messages {
            return Err(FragmentError::TooManyMessages {
                max: limits.max_messages,
            });
        }
        // Every check is passed: from here on the part is taken.
        self.bytes = bytes;
        let entry = self
            .pending
            .entry(message_id.to_string())
            .or_insert_with(|| Pending {
                first: now,
                parts: vec![None; sum],
                missing: sum,
            });
        if entry.parts[seq].replace(payload).is_none() {
            entry.missing -= 1;
        }
        if entry.missing > 0 {
            return Ok(None);
        }
        let Some(done) = self.pending.remove(message_id) else {
            return Ok(None);
        };
        let mut whole = Vec::with_capacity(done.parts.iter().flatten().map(Vec::len).sum());
        for part in done.parts.into_iter().flatten() {
            whole.extend_from_slice(&part);
        }
        self.bytes -= whole.len();
        Ok(Some(whole))
    }

    /// Drops messages whose first fragment is older than the expiry; how many.
    pub fn expire(&mut self, now: Instant) -> usize {
        let expiry = self.limits.expiry;
        let before = self.pending.len();
        let mut freed = 0;
        self.pending.retain(|_, p| {
            let keep = now.saturating_duration_since(p.first) < expiry;
            if !keep {
                freed += p.parts.iter().flatten().map(Vec::len).sum::<usize>();
            }
            keep
        });
        self.bytes -= freed;
        before - self.pending.len()
    }

    /// Split messages waiting for parts.
    pub fn len(&self) -> usize {
        self.pending.len()
    }

    /// Whether no split message is waiting.
    pub fn is_empty(&self) -> bool {
        self.pending.is_empty()
    }

    /// Bytes of parts held, over all waiting messages.
    pub fn bytes(&self) -> usize {
        self.bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::longconn::frame::Frame;

    fn small() -> FragmentLimits {
        FragmentLimits {
            max_messages: 2,
            max_bytes: 10,
            max_parts: 4,
            expiry: Duration::from_secs(10),
        }
    }

    #[test]
    fn parts_in_reverse_order_join_in_seq_order() {
        let mut f = Fragments::new(FragmentLimits::default());
        let now = Instant::now();
        assert_eq!(f.add("m", 3, 2, b"ghi".to_vec(), now), Ok(None));
        assert_eq!(f.add("m", 3, 1, b"def".to_vec(), now), Ok(None));
        assert_eq!((f.len(), f.bytes()), (1, 6));
        let whole = f.add("m", 3, 0, b"abc".to_vec(), now);
        assert_eq!(whole, Ok(Some(b"abcdefghi".to_vec())));
        assert!(f.is_empty());
        assert_eq!(f.bytes(), 0);
    }

    #[test]
    fn an_unsplit_message_passes_straight_through() {
        let mut f = Fragments::new(small());
        let big = vec![b'x'; 100];
        let now = Instant::now();
        assert_eq!(f.add("m", 1, 0, big.clone(), now), Ok(Some(big)));
        assert!(f.is_empty(), "nothing held");
        assert_eq!(
            f.add("m", 1, 1, b"x".to_vec(), now),
            Err(FragmentError::SeqOutOfRange { seq: 1, sum: 1 })
        );
    }

    #[test]
    fn a_repeated_seq_replaces_its_part() {
        let mut f = Fragments::new(FragmentLimits::default());
        let now = Instant::now();
        assert_eq!(f.add("m", 2, 1, b"old-tail".to_vec(), now), Ok(None));
        assert_eq!(f.add("m", 2, 1, b"tail".to_vec(), now), Ok(None));
        assert_eq!(f.bytes(), 4);
        let whole = f.add("m", 2, 0, b"head-".to_vec(), now);
        assert_eq!(whole, Ok(Some(b"head-tail".to_vec())));
        assert_eq!(f.bytes(), 0);
    }

    #[test]
    fn malformed_parts_are_refused() {
        let mut f = Fragments::new(small());
        let now = Instant::now();
        let mut add = |sum, seq| f.add("m", sum, seq, b"x".to_vec(), now);
        assert_eq!(add(0, 0), Err(FragmentError::NoParts));
        assert_eq!(
            add(5, 0),
            Err(FragmentError::TooManyParts { sum: 5, max: 4 })
        );
        assert_eq!(
            add(2, 2),
            Err(FragmentError::SeqOutOfRange { seq: 2, sum: 2 })
        );
        assert_eq!(add(2, 0), Ok(None));
        assert_eq!(
            add(3, 1),
            Err(FragmentError::SumChanged { held: 2, sum: 3 })
        );
        assert_eq!(
            add(1, 0),
            Err(FragmentError::SumChanged { held: 2, sum: 1 })
        );
        assert_eq!(add(2, 1), Ok(Some(b"xx".to_vec())), "the held part intact");
    }

    #[test]
    fn a_full_buffer_refuses_without_harming_what_it_holds() {
        let mut f = Fragments::new(small());
        let now = Instant::now();
        assert_eq!(f.add("a", 2, 0, b"a0a0".to_vec(), now), Ok(None));
        assert_eq!(f.add("b", 2, 0, b"b0".to_vec(), now), Ok(None));
        assert_eq!(
            f.add("c", 2, 0, b"c".to_vec(), now),
            Err(FragmentError::TooManyMessages { max: 2 })
        );
        assert_eq!(
            f.add("b", 2, 1, b"b1b1b1".to_vec(), now),
            Err(FragmentError::TooManyBytes { max: 10 })
        );
        assert_eq!(
            f.add("a", 2, 0, b"a0a0a0a0a0".to_vec(), now),
            Err(FragmentError::TooManyBytes { max: 10 }),
            "a replacement counts its growth"
        );
        assert_eq!((f.len(), f.bytes()), (2, 6));
        assert_eq!(
            f.add("a", 2, 1, b"a1".to_vec(), now),
            Ok(Some(b"a0a0a1".to_vec()))
        );
        assert_eq!(
            f.add("b", 2, 1, b"b1".to_vec(), now),
            Ok(Some(b"b0b1".to_vec()))
        );
        assert_eq!(f.add("c", 2, 0, b"c".to_vec(), now), Ok(None), "room again");
    }

    #[test]
    fn messages_expire_from_their_first_part() {
        let mut f = Fragments::new(small());
        let start = Instant::now();
        let later = |s| start + Duration::from_secs(s);
        assert_eq!(f.add("old", 3, 0, b"o".to_vec(), start), Ok(None));
        assert_eq!(f.add("new", 2, 0, b"n".to_vec(), later(6)), Ok(None));
        assert_eq!(f.add("old", 3, 1, b"o".to_vec(), later(9)), Ok(None));
        assert_eq!(
            f.expire(later(9)),
            0,
            "a later part does not extend the wait"
        );
        assert_eq!(f.expire(later(10)), 1);
        assert_eq!((f.len(), f.bytes()), (1, 1));
        // A late part of the expired message starts it afresh; it cannot complete it.
        assert_eq!(f.add("old", 3, 2, b"o".to_vec(), later(11)), Ok(None));
        assert_eq!(f.expire(later(30)), 2);
        assert!(f.is_empty());
        assert_eq!(f.bytes(), 0);
    }

    #[test]
    fn the_sdk_fixtures_parts_join_into_their_event() {
        let fixture: serde_json::Value =
            serde_json::from_str(include_str!("../../tests/fixtures/pbbp2-frames.json"))
                .expect("fixture JSON");
        let frame = |name: &str| {
            let entry = fixture["frames"]
                .as_array()
                .and_then(|a| a.iter().find(|f| f["name"] == name))
                .unwrap_or_else(|| panic!("fixture {name}"));
            let bytes = hex::decode(entry["hex"].as_str().expect("hex")).expect("hex");
            Frame::decode_bytes(&bytes).expect("a frame")
        };
        let mut f = Fragments::new(FragmentLimits::default());
        let now = Instant::now();
        let mut whole = None;
        for name in ["fragment_1_of_2", "fragment_0_of_2"] {
            let part = frame(name);
            let number = |key| part.header(key).and_then(|v| v.parse().ok()).expect(key);
            let id = part.header("message_id").expect("message_id");
            let payload = part.payload.clone().expect("payload");
            whole = f
                .add(id, number("sum"), number("seq"), payload, now)
                .expect("taken");
        }
        let event = frame("event").payload.expect("payload");
        assert_eq!(whole, Some(event));
    }
}
