//! Data frames out (protocol note §5 "Inbound frames", "Fragmentation"), and the waits
//! for their ACKs (matched and checked in `ack`).
//!
//! Every fragment is its own frame with its own SeqID (the docs are silent on whether
//! fragments share one); an ACK may echo any fragment of its message, though the SDKs
//! echo the one that completed the set.

use std::collections::HashMap;

use super::{
    Cmd, FakeLongConn, Phase, SERVICE_ID,
    ack::Ack,
    frame::{Frame, METHOD_DATA},
};

/// LogIDs are `LOG_ID_BASE + SeqID`: past 32 bits, so a client that narrows the
/// uint64 is caught by the echo check (the docs give no real values).
pub const LOG_ID_BASE: u64 = 1 << 40;

/// The order in which the fragments of one message are sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Order {
    /// `seq` 0, 1, …, sum−1.
    Ascending,
    /// `seq` sum−1, …, 0.
    Reversed,
    /// These `seq` values, a permutation of 0..sum.
    Given(Vec<usize>),
}

/// One message to push: a `type=event` or `type=card` data frame, possibly in fragments.
#[derive(Debug, Clone)]
pub struct Push {
    /// Header `type`: `event` or `card`.
    pub kind: String,
    /// The whole payload; fragments are byte slices of it (they may split a UTF-8
    /// character: the SDKs join bytes before decoding, §5).
    pub payload: Vec<u8>,
    /// Header `sum`: the fragment count, at least 1 and at most the payload's length.
    pub fragments: usize,
    /// The order the fragments go out in.
    pub order: Order,
    /// Send only the first N fragments (in `order`): a message that never completes.
    pub only_first: Option<usize>,
    /// Header `message_id`; `None`: `lc-msg-<n>`.
    pub message_id: Option<String>,
}

impl Push {
    /// A `type=event` push of `payload`, unsplit.
    pub fn event(payload: Vec<u8>) -> Self {
        Self {
            kind: "event".into(),
            payload,
            fragments: 1,
            order: Order::Ascending,
            only_first: None,
            message_id: None,
        }
    }

    /// A `type=card` push (some apps receive card clicks in such frames, §5).
    pub fn card(payload: Vec<u8>) -> Self {
        Self {
            kind: "card".into(),
            ..Self::event(payload)
        }
    }

    /// Split into `k` fragments.
    pub fn fragments(mut self, k: usize) -> Self {
        self.fragments = k;
        self
    }

    /// Send the fragments last first.
    pub fn reversed(mut self) -> Self {
        self.order = Order::Reversed;
        self
    }

    /// Send the fragments in this `seq` order.
    pub fn order(mut self, seqs: Vec<usize>) -> Self {
        self.order = Order::Given(seqs);
        self
    }

    /// Send only the first `n` fragments.
    pub fn only_first(mut self, n: usize) -> Self {
        self.only_first = Some(n);
        self
    }

    /// Use this `message_id` (e.g. to redeliver under the same or a new one).
    pub fn message_id(mut self, id: &str) -> Self {
        self.message_id = Some(id.into());
        self
    }
}

/// Every message pushed so far.
#[derive(Default)]
pub(super) struct Pushed {
    next_seq: u64,
    /// In pushing order.
    pub(super) messages: Vec<Message>,
    /// SeqID of every fragment sent → index in `messages`.
    pub(super) by_seq: HashMap<u64, usize>,
}

/// One pushed message.
pub(super) struct Message {
    /// The connection it went out on.
    pub(super) conn: usize,
    pub(super) message_id: String,
    /// Its fragments that were sent, by SeqID.
    pub(super) frames: HashMap<u64, Frame>,
    /// All `sum` fragments were sent.
    pub(super) complete: bool,
    pub(super) ack: Option<Ack>,
}

impl Pushed {
    pub(super) fn acks(&self) -> usize {
        self.messages.iter().filter(|m| m.ack.is_some()).count()
    }

    /// The frames of `p` for connection `conn`, in sending order, now recorded.
    fn frames(&mut self, conn: usize, p: &Push) -> Vec<Frame> {
        let (k, len) = (p.fragments, p.payload.len());
        assert!(k >= 1 && len >= k, "{k} fragments of {len} bytes");
        let order: Vec<usize> = match &p.order {
            Order::Ascending => (0..k).collect(),
            Order::Reversed => (0..k).rev().collect(),
            Order::Given(seqs) => seqs.clone(),
        };
        let mut sorted = order.clone();
        sorted.sort_unstable();
        assert!(
            sorted == (0..k).collect::<Vec<_>>(),
            "{order:?} orders 0..{k}"
        );
        let index = self.messages.len();
        let message_id = p
            .message_id
            .clone()
            .unwrap_or(format!("lc-msg-{}", index + 1));
        let (sum, trace_id) = (k.to_string(), format!("lc-trace-{}", index + 1));
        let sent = p.only_first.unwrap_or(k).min(k);
        let mut frames = Vec::new();
        for &part in &order[..sent] {
            self.next_seq += 1;
            let seq = self.next_seq;
            let headers = [
                ("type", p.kind.as_str()),
                ("message_id", &message_id),
                ("sum", &sum),
                ("seq", &part.to_string()),
                ("trace_id", &trace_id),
            ];
            let mut f = Frame::new(seq, LOG_ID_BASE + seq, SERVICE_ID, METHOD_DATA, &headers);
            f.payload = Some(p.payload[part * len / k..(part + 1) * len / k].to_vec());
            self.by_seq.insert(seq, index);
            frames.push(f);
        }
        self.messages.push(Message {
            conn,
            message_id,
            frames: frames.iter().map(|f| (f.seq_id, f.clone())).collect(),
            complete: sent == k,
            ack: None,
        });
        frames
    }
}

impl FakeLongConn {
    /// Pushes `p` on the newest open connection (waiting for one) and waits for its
    /// ACK; panics when the connection ends first.
    pub async fn push(&self, p: Push) -> Ack {
        let seq = self.push_no_wait(p).await;
        let ack = self.ack(seq).await;
        ack.unwrap_or_else(|| panic!("the connection ended before the ACK of SeqID {seq}"))
    }

    /// Pushes `p` on the newest open connection (waiting for one) and returns the
    /// SeqID of its last fragment sent, for [`FakeLongConn::ack`].
    pub async fn push_no_wait(&self, p: Push) -> u64 {
        let (n, cmds) = self
            .wait("an open long connection", |i| {
                let open = i.conns.iter().enumerate().rev();
                let mut open = open.filter(|(_, c)| c.phase == Phase::Open);
                open.next().map(|(k, c)| (k + 1, c.cmds.clone()))
            })
            .await;
        let frames = self.state.update(|i| i.push.frames(n, &p));
        let last = frames.last().map(|f| f.seq_id).unwrap_or_default();
        for f in frames {
            // A connection that just ended: the message stays unacknowledged.
            let _ = cmds.send(Cmd::Send(f.encode()));
        }
        last
    }

    /// The ACK of the message that SeqID `seq` (any of its fragments) belongs to: waits
    /// until it arrives (`Some`), or until the connection it was pushed on can no
    /// longer deliver one, having ended or gone silent (`None`). After a shutdown
    /// mid-stream, `Some` with code 200 marks what the client took responsibility for;
    /// Feishu re-pushes the rest (§5 "Timing and redelivery").
    pub async fn ack(&self, seq: u64) -> Option<Ack> {
        let known = self.state.lock().push.by_seq.contains_key(&seq);
        assert!(known, "SeqID {seq} was never pushed");
        self.wait(&format!("the ACK of SeqID {seq}"), |i| {
            let m = &i.push.messages[i.push.by_seq[&seq]];
            if let Some(ack) = &m.ack {
                return Some(Some(ack.clone()));
            }
            let gone = matches!(i.conns[m.conn - 1].phase, Phase::Ended | Phase::Silent);
            gone.then_some(None)
        })
        .await
    }
}
