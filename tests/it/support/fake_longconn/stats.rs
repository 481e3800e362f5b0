//! What the fake counts, as a snapshot for assertions.

use super::{Inner, Phase};

/// Counters and lists of what happened, for assertions.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Stats {
    /// `POST /callback/ws/endpoint` requests, including refused ones.
    pub endpoint_requests: usize,
    /// Every URL handed out, in order.
    pub urls: Vec<String>,
    /// Tickets presented in an upgrade (each at most once when the client conforms).
    pub tickets_used: Vec<String>,
    /// Upgrades refused (queued answers, bad tickets, too many connections).
    pub handshakes_refused: usize,
    /// Connections accepted: counted once the upgrade has completed, so wait with
    /// [`FakeLongConn::connected`] rather than reading this right after dialling.
    pub connections: usize,
    /// Each connection's phase, by connection number − 1.
    pub phases: Vec<Phase>,
    /// Pings received, by connection number − 1.
    pub pings: Vec<usize>,
    /// Binary frames received from the client (pings, ACKs, anything else).
    pub frames_in: usize,
    /// Frames written to the client (pongs and pushed fragments).
    pub frames_out: usize,
    /// ACKs matched to a pushed message.
    pub acks: usize,
}

pub(super) fn stats(i: &Inner) -> Stats {
    Stats {
        endpoint_requests: i.endpoint_requests,
        urls: i.urls.clone(),
        tickets_used: i.tickets_used.clone(),
        handshakes_refused: i.handshakes_refused,
        connections: i.conns.len(),
        phases: i.conns.iter().map(|c| c.phase).collect(),
        pings: i.conns.iter().map(|c| c.pings).collect(),
        frames_in: i.frames_in,
        frames_out: i.frames_out,
        acks: i.push.acks(),
    }
}
