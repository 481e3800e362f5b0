//! Serving HTTP/1.1: the accept loop, the cap on open connections, and the time limits
//! that keep slow or silent clients from holding connections Feishu needs.
//!
//! At most `server.max_connections` connections are served at once. At the cap a new
//! connection is still accepted, and the waiting connection (for a request head, a body
//! or the next request) nearest to its deadline is closed to make room for it; a client
//! that sends its request at once, as Feishu does, waits only milliseconds, so its
//! deadline is among the latest. When every connection is busy with a request, the new
//! one waits for a slot, and further ones wait in the kernel's listen backlog (costing
//! no file descriptor). When accepting fails for want of file descriptors, a waiting
//! connection is closed the same way and the loop pauses briefly (longer each time when
//! none is waiting) instead of spinning; such errors are logged at most once a minute.

mod connection;
mod phase;
mod registry;
mod tracked;

use std::{future::Future, io, sync::Arc, time::Duration};

use axum::Router;
use connection::Shared;
pub use phase::Limits;
use phase::Phase;
use tokio::{
    net::{TcpListener, TcpStream},
    sync::{OwnedSemaphorePermit, Semaphore, watch},
    time::{Instant, sleep},
};
use tokio_util::sync::CancellationToken;

use crate::telemetry::Metrics;

/// How often a server at its cap with every connection busy looks again for one to close.
const RECHECK: Duration = Duration::from_millis(50);

/// Serves `router` on `listener` until `shutdown` resolves; then stops accepting, lets
/// each connection answer the request it is in, and returns once all are closed.
pub async fn serve(
    listener: TcpListener,
    router: Router,
    limits: Limits,
    metrics: Metrics,
    shutdown: impl Future<Output = ()>,
) {
    let slots = Arc::new(Semaphore::new(limits.max_connections as usize));
    let shared = Arc::new(Shared {
        router,
        limits,
        metrics,
        stop: CancellationToken::new(),
        registry: Arc::default(),
    });
    let mut at_cap = Throttle::default();
    let mut failing = Throttle::default();
    let mut backoff = Backoff::default();
    tokio::pin!(shutdown);
    loop {
        let accepted = tokio::select! {
            () = &mut shutdown => break,
            accepted = listener.accept() => accepted,
        };
        let stream = match accepted {
            Ok((stream, _)) => {
                backoff.reset();
                stream
            }
            // The client gave up before it was accepted: nothing to wait for.
            Err(e) if is_connection_error(&e) => continue,
            Err(e) => {
                let pause = after_failed_accept(&e, &shared, &mut failing, &mut backoff).await;
                tokio::select! {
                    () = &mut shutdown => break,
                    () = sleep(pause) => continue,
                }
            }
        };
        let slot = match slots.clone().try_acquire_owned() {
            Ok(slot) => slot,
            Err(_) => {
                if at_cap.due() {
                    tracing::warn!(
                        max_connections = limits.max_connections,
                        "connection limit reached; closing waiting connections to make room"
                    );
                }
                tokio::select! {
                    () = &mut shutdown => break,
                    slot = make_room(&slots, &shared) => slot,
                }
            }
        };
        spawn_connection(stream, slot, &shared);
    }
    drop(listener);
    shared.stop.cancel();
    // Every slot back means every connection is closed.
    let _all = slots.acquire_many(limits.max_connections).await;
}

/// After a failed accept, out of file descriptors (or memory): a waiting connection gives
/// its descriptor up, or, with none waiting, the pause before the next accept grows.
async fn after_failed_accept(
    e: &io::Error,
    shared: &Shared,
    failing: &mut Throttle,
    backoff: &mut Backoff,
) -> Duration {
    if failing.due() {
        tracing::warn!(error = %e, "accept failed; backing off");
    } else {
        tracing::debug!(error = %e, "accept failed; backing off");
    }
    match shared.registry.evict_one(&shared.limits) {
        Some(victim) => {
            backoff.reset();
            gone(victim).await;
            Duration::ZERO
        }
        None => backoff.next(),
    }
}

/// Serves an accepted connection in a task of its own, holding `slot` while it is open.
fn spawn_connection(stream: TcpStream, slot: OwnedSemaphorePermit, shared: &Arc<Shared>) {
    let open = Open::new(slot, &shared.metrics);
    let conn = connection::serve_connection(stream, shared.clone());
    tokio::spawn(async move {
        conn.await;
        drop(open);
    });
}

/// Closes a waiting connection and takes its slot; while every connection is busy,
/// waits for one to finish or to start waiting.
async fn make_room(slots: &Arc<Semaphore>, shared: &Shared) -> OwnedSemaphorePermit {
    loop {
        let evicted = shared.registry.evict_one(&shared.limits).is_some();
        tokio::select! {
            slot = slots.clone().acquire_owned() => match slot {
                Ok(slot) => return slot,
                // The semaphore is never closed.
                Err(_) => std::future::pending::<()>().await,
            },
            () = sleep(RECHECK), if !evicted => {}
        }
    }
}

/// Resolves once an evicted connection is gone and its descriptor free (at most a
/// second: a connection's close does not wait on its client).
async fn gone(mut victim: watch::Receiver<Phase>) {
    let closed = async { while victim.changed().await.is_ok() {} };
    // Elapsed is the promised bound: after a second the caller goes on regardless.
    let _ = tokio::time::timeout(Duration::from_secs(1), closed).await;
}

fn is_connection_error(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::ConnectionRefused
            | io::ErrorKind::ConnectionAborted
            | io::ErrorKind::ConnectionReset
    )
}

/// One open connection: counted in the gauge while it lives, its slot freed after.
struct Open {
    gauge: prometheus::IntGauge,
    _slot: OwnedSemaphorePermit,
}

impl Open {
    fn new(slot: OwnedSemaphorePermit, metrics: &Metrics) -> Self {
        let gauge = metrics.http_connections.clone();
        gauge.inc();
        // Only the accept loop opens connections, so the peak has a single writer.
        let now = gauge.get();
        if now > metrics.http_connections_peak.get() {
            metrics.http_connections_peak.set(now);
        }
        Self { gauge, _slot: slot }
    }
}

impl Drop for Open {
    fn drop(&mut self) {
        // The gauge drops before the slot frees, so it never reads above the cap.
        self.gauge.dec();
    }
}

/// Says yes at most once a minute.
#[derive(Debug, Default)]
struct Throttle(Option<Instant>);

impl Throttle {
    fn due(&mut self) -> bool {
        let now = Instant::now();
        let due = self
            .0
            .is_none_or(|last| now.duration_since(last) >= Duration::from_secs(60));
        if due {
            self.0 = Some(now);
        }
        due
    }
}

/// Doubling pauses after failed accepts, from 10 ms up to 1 s.
#[derive(Debug, Default)]
struct Backoff(Option<Duration>);

impl Backoff {
    fn next(&mut self) -> Duration {
        let pause = self.0.map_or(Duration::from_millis(10), |d| {
            (d * 2).min(Duration::from_secs(1))
        });
        self.0 = Some(pause);
        pause
    }

    fn reset(&mut self) {
        self.0 = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_up_to_a_second_and_starts_over_after_success() {
        let mut b = Backoff::default();
        let pauses: Vec<u64> = (0..9).map(|_| b.next().as_millis() as u64).collect();
        assert_eq!(pauses, [10, 20, 40, 80, 160, 320, 640, 1000, 1000]);
        b.reset();
        assert_eq!(b.next(), Duration::from_millis(10));
    }

    #[test]
    fn a_throttle_says_yes_once_then_waits() {
        let mut t = Throttle::default();
        assert!(t.due());
        assert!(!t.due());
    }

    #[test]
    fn only_a_client_that_left_early_is_a_connection_error() {
        assert!(is_connection_error(
            &io::ErrorKind::ConnectionAborted.into()
        ));
        let emfile = io::Error::from_raw_os_error(24);
        assert!(!is_connection_error(&emfile), "{emfile}");
    }
}
