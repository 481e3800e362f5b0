//! Where one connection stands between its requests, and how long it may stay there.
//!
//! A connection is always in one [`Phase`]. Three of them wait on the client and have a
//! deadline: the head of a request (from its first byte), its body, and the idle time
//! before a request. A connection just accepted counts as idle until its first byte:
//! HTTP clients dial connections that they then park unused in their pools, and closing
//! one at the head bound would race the request the client sends on it later. While the router handles
//! a request there is no deadline here: the router's own timeout bounds that.

use std::time::Duration;

use tokio::{sync::watch, time::Instant};

use crate::config::ServerConfig;

/// The time limits and the connection cap, from `[server]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Longest wait for a complete request head.
    pub header_timeout: Duration,
    /// Longest wait for a complete request body.
    pub body_timeout: Duration,
    /// Longest wait for the next request on a kept-alive connection.
    pub idle_timeout: Duration,
    /// Most connections served at once.
    pub max_connections: u32,
}

impl Limits {
    /// The limits configured in `[server]`.
    pub fn from_config(server: &ServerConfig) -> Self {
        Self {
            header_timeout: Duration::from_secs(server.header_timeout_secs),
            body_timeout: Duration::from_secs(server.body_timeout_secs),
            idle_timeout: Duration::from_secs(server.idle_timeout_secs),
            max_connections: server.max_connections,
        }
    }
}

/// What a connection is waiting for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// The rest of a request head, since this instant.
    Head(Instant),
    /// The rest of a request body, since this instant.
    Body(Instant),
    /// The router: the request is being handled or its answer written.
    Handling,
    /// The next request on a kept-alive connection, since this instant.
    Idle(Instant),
}

impl Phase {
    /// When the connection is to be closed if it is still in this phase.
    pub fn deadline(self, limits: &Limits) -> Option<Instant> {
        match self {
            Self::Head(since) => Some(since + limits.header_timeout),
            Self::Body(since) => Some(since + limits.body_timeout),
            Self::Idle(since) => Some(since + limits.idle_timeout),
            Self::Handling => None,
        }
    }

    /// Why a connection overstaying this phase is closed (a metric label).
    pub fn timeout_reason(self) -> &'static str {
        match self {
            Self::Head(_) => "header_timeout",
            Self::Body(_) => "body_timeout",
            Self::Idle(_) => "idle_timeout",
            Self::Handling => "handling",
        }
    }
}

/// Moves one connection through its phases; shared by its socket, its service and its
/// request and response bodies.
#[derive(Debug, Clone)]
pub struct Tracker(watch::Sender<Phase>);

impl Tracker {
    /// A connection just accepted: idle until the first byte of its first request.
    pub fn accepted() -> (Self, watch::Receiver<Phase>) {
        let (tx, rx) = watch::channel(Phase::Idle(Instant::now()));
        (Self(tx), rx)
    }

    /// Bytes came in: an idle connection starts a new request head.
    pub fn bytes_arrived(&self) {
        self.0.send_if_modified(|p| match p {
            Phase::Idle(_) => {
                *p = Phase::Head(Instant::now());
                true
            }
            _ => false,
        });
    }

    /// A request head is complete; its body, if any, is still to come.
    pub fn request_started(&self, has_body: bool) {
        self.0.send_replace(if has_body {
            Phase::Body(Instant::now())
        } else {
            Phase::Handling
        });
    }

    /// The request body has been read (or given up on by the handler).
    pub fn request_body_done(&self) {
        self.0.send_if_modified(|p| match p {
            Phase::Body(_) => {
                *p = Phase::Handling;
                true
            }
            _ => false,
        });
    }

    /// The answer has been handed to the connection: it waits for the next request.
    pub fn response_done(&self) {
        self.0.send_if_modified(|p| match p {
            Phase::Body(_) | Phase::Handling => {
                *p = Phase::Idle(Instant::now());
                true
            }
            _ => false,
        });
    }
}

/// Resolves with the phase a connection overstayed; never resolves while the
/// connection keeps within its limits.
pub async fn overstayed(rx: &mut watch::Receiver<Phase>, limits: &Limits) -> Phase {
    loop {
        let phase = *rx.borrow_and_update();
        let Some(deadline) = phase.deadline(limits) else {
            if rx.changed().await.is_err() {
                std::future::pending::<()>().await;
            }
            continue;
        };
        tokio::select! {
            () = tokio::time::sleep_until(deadline) => {
                // A move to the next phase at the last moment wins over the deadline.
                if !rx.has_changed().unwrap_or(false) {
                    return phase;
                }
            }
            changed = rx.changed() => {
                if changed.is_err() {
                    std::future::pending::<()>().await;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits() -> Limits {
        Limits {
            header_timeout: Duration::from_secs(10),
            body_timeout: Duration::from_secs(20),
            idle_timeout: Duration::from_secs(75),
            max_connections: 8,
        }
    }

    #[test]
    fn a_request_moves_through_head_body_handling_and_idle() {
        let (tracker, rx) = Tracker::accepted();
        assert!(
            matches!(*rx.borrow(), Phase::Idle(_)),
            "nothing sent yet: idle"
        );
        tracker.bytes_arrived();
        let Phase::Head(first) = *rx.borrow() else {
            panic!("the first byte starts a head")
        };
        tracker.bytes_arrived();
        assert_eq!(*rx.borrow(), Phase::Head(first), "still the same head");
        tracker.request_started(true);
        assert!(matches!(*rx.borrow(), Phase::Body(_)));
        tracker.request_body_done();
        assert_eq!(*rx.borrow(), Phase::Handling);
        tracker.response_done();
        assert!(matches!(*rx.borrow(), Phase::Idle(_)));
        // A late drop of the request body does not wake an idle connection.
        tracker.request_body_done();
        assert!(matches!(*rx.borrow(), Phase::Idle(_)));
        tracker.bytes_arrived();
        assert!(matches!(*rx.borrow(), Phase::Head(_)));
        tracker.request_started(false);
        assert_eq!(*rx.borrow(), Phase::Handling);
    }

    #[test]
    fn each_waiting_phase_has_its_own_bound_and_handling_has_none() {
        let now = Instant::now();
        let l = limits();
        assert_eq!(Phase::Head(now).deadline(&l), Some(now + l.header_timeout));
        assert_eq!(Phase::Body(now).deadline(&l), Some(now + l.body_timeout));
        assert_eq!(Phase::Idle(now).deadline(&l), Some(now + l.idle_timeout));
        assert_eq!(Phase::Handling.deadline(&l), None);
        let reasons =
            [Phase::Head(now), Phase::Body(now), Phase::Idle(now)].map(Phase::timeout_reason);
        assert_eq!(reasons, ["header_timeout", "body_timeout", "idle_timeout"]);
    }

    #[tokio::test]
    async fn the_phase_reported_is_the_one_overstayed() {
        let l = Limits {
            header_timeout: Duration::from_secs(3600),
            idle_timeout: Duration::from_millis(1),
            ..limits()
        };
        let (tracker, mut rx) = Tracker::accepted();
        let waiting = tokio::spawn(async move { overstayed(&mut rx, &l).await });
        // The hour-long head wait is left for a request and an idle spell.
        tracker.request_started(false);
        tracker.response_done();
        let phase = tokio::time::timeout(Duration::from_secs(30), waiting)
            .await
            .expect("an idle spell past its bound is reported")
            .expect("join");
        assert!(matches!(phase, Phase::Idle(_)), "{phase:?}");
    }
}
