//! One accepted connection: HTTP/1.1 by hyper over the axum router, closed when it
//! overstays a phase or must make room, drained when the server shuts down.

use std::{convert::Infallible, future::Future, pin::Pin, sync::Arc};

use axum::{Router, body::Body as AxumBody};
use hyper::{
    Request, Response,
    body::{Body as _, Incoming},
    server::conn::http1,
};
use hyper_util::rt::TokioIo;
use tokio::{net::TcpStream, sync::watch};
use tokio_util::sync::CancellationToken;
use tower::ServiceExt as _;

use super::{
    phase::{Limits, Phase, Tracker, overstayed},
    registry::{Registration, Registry},
    tracked::{BodyEnd, TrackedBody, WatchedIo},
};
use crate::telemetry::Metrics;

/// What every connection of one server shares.
#[derive(Debug)]
pub struct Shared {
    /// The routes.
    pub router: Router,
    /// Time limits and the cap.
    pub limits: Limits,
    /// Where closes are counted.
    pub metrics: Metrics,
    /// Cancelled when the server shuts down.
    pub stop: CancellationToken,
    /// The open connections.
    pub registry: Arc<Registry>,
}

/// Registers a just-accepted connection (at once, so that it can be chosen to make room
/// from now on) and returns the future that serves it until the client leaves, a phase
/// is overstayed, the connection must make room, or (once the server stops) the request
/// in flight is answered.
pub fn serve_connection(stream: TcpStream, shared: Arc<Shared>) -> impl Future<Output = ()> {
    let (tracker, phases) = Tracker::accepted();
    let registration = shared.registry.register(phases.clone());
    serve(stream, shared, tracker, phases, registration)
}

async fn serve(
    stream: TcpStream,
    shared: Arc<Shared>,
    tracker: Tracker,
    mut phases: watch::Receiver<Phase>,
    registration: Registration,
) {
    let io = TokioIo::new(WatchedIo::new(stream, tracker.clone()));
    let service = RouterService {
        router: shared.router.clone(),
        tracker,
    };
    let mut builder = http1::Builder::new();
    // hyper's own head timeout would also run while a kept-alive connection waits for its
    // next request, so it is off: the phases bound the head and the idle time apart.
    builder.header_read_timeout(None);
    let conn = builder.serve_connection(io, service);
    tokio::pin!(conn);
    let mut draining = false;
    let closed = loop {
        tokio::select! {
            served = conn.as_mut() => {
                if let Err(e) = served {
                    tracing::debug!(error = %e, "connection ended with an error");
                }
                return;
            }
            phase = overstayed(&mut phases, &shared.limits) => break phase.timeout_reason(),
            () = registration.evicted() => break "evicted",
            () = shared.stop.cancelled(), if !draining => {
                // Idle connections close now; one with a request in flight answers it first.
                draining = true;
                conn.as_mut().graceful_shutdown();
            }
        }
    };
    tracing::debug!(reason = closed, "closing a connection");
    shared
        .metrics
        .http_connections_closed
        .with_label_values(&[closed])
        .inc();
}

/// The router as a hyper service, with its bodies reporting to the connection's tracker.
#[derive(Debug, Clone)]
struct RouterService {
    router: Router,
    tracker: Tracker,
}

type Answer = Response<TrackedBody<AxumBody>>;

impl hyper::service::Service<Request<Incoming>> for RouterService {
    type Response = Answer;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Answer, Infallible>> + Send>>;

    fn call(&self, req: Request<Incoming>) -> Self::Future {
        self.tracker.request_started(!req.body().is_end_stream());
        let tracker = self.tracker.clone();
        let req = req.map(|body| TrackedBody::new(body, BodyEnd::Request, tracker.clone()));
        let router = self.router.clone();
        Box::pin(async move {
            let Ok(response) = router.oneshot(req).await;
            Ok(response.map(|body| TrackedBody::new(body, BodyEnd::Response, tracker)))
        })
    }
}
