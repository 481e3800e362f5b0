//! The Prometheus metrics of one app instance.
//!
//! Label values are bounded: profiles come from the config (an unknown profile is
//! counted as `unknown`), routes are matched paths, outcomes are fixed strings.

use std::sync::Arc;

use prometheus::{
    Encoder, Gauge, GaugeVec, HistogramOpts, HistogramVec, IntCounterVec, IntGauge, IntGaugeVec,
    Opts, Registry, TextEncoder,
};

use super::{
    RateMeter, digest::DigestMetrics, feed::FeedMetrics, long_connection::LongConnMetrics,
};

/// Every metric the bridge exports.
#[derive(Clone)]
pub struct Metrics {
    registry: Registry,
    /// Webhook requests by profile, kind (`event`/`card`) and outcome.
    pub webhook_requests: IntCounterVec,
    /// HTTP request latency by route, method and status.
    pub http_duration: HistogramVec,
    /// Events waiting in the inbox (refreshed at scrape).
    pub inbox_pending: IntGauge,
    /// Events given up on (refreshed at scrape).
    pub inbox_failed: IntGauge,
    /// Pending events that already failed once (refreshed at scrape).
    pub inbox_retrying: IntGauge,
    /// Unfinished events (pending or in hand) by profile (refreshed at scrape).
    pub inbox_depth: IntGaugeVec,
    /// Age of the oldest unfinished event by profile, 0 when none (refreshed at scrape).
    pub inbox_oldest_age: GaugeVec,
    /// Events processed by the worker, by profile, type and outcome.
    pub events_processed: IntCounterVec,
    /// The worker's events per second over the last few seconds (refreshed at scrape).
    pub worker_events_per_second: Gauge,
    /// What feeds `worker_events_per_second` and `/status`.
    pub worker_rate: Arc<RateMeter>,
    /// Store operations that failed, by operation.
    pub store_errors: IntCounterVec,
    /// Events per group-commit transaction.
    pub commit_batch_size: HistogramVec,
    /// Turns that ended, by profile and outcome.
    pub turns_finished: IntCounterVec,
    /// Handoffs between bots, by outcome (`started`, `refused`, `cut_hops`,
    /// `cut_pingpong`, `cut_budget`, `cancelled`).
    pub handoffs: IntCounterVec,
    /// HTTP connections being served now.
    pub http_connections: IntGauge,
    /// Most HTTP connections served at once since start.
    pub http_connections_peak: IntGauge,
    /// Connections the server closed, by reason (`header_timeout`, `body_timeout`,
    /// `idle_timeout`, `evicted`).
    pub http_connections_closed: IntCounterVec,
    /// The long connection's.
    pub long_connection: LongConnMetrics,
    /// The batched feed's.
    pub feed: FeedMetrics,
    /// The daily digest's.
    pub digest: DigestMetrics,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Metrics")
    }
}

impl Metrics {
    /// A fresh registry with every metric registered.
    pub fn new() -> Self {
        let registry = Registry::new_custom(Some("feishu_bridge".into()), None)
            .expect("static registry options are valid");
        let m = Self {
            long_connection: LongConnMetrics::registered(&registry),
            feed: FeedMetrics::registered(&registry),
            digest: DigestMetrics::registered(&registry),
            registry,
            webhook_requests: counter_vec(
                "webhook_requests_total",
                "Feishu callback requests by outcome.",
                &["profile", "kind", "outcome"],
            ),
            http_duration: histogram_vec(
                "http_request_duration_seconds",
                "HTTP request latency.",
                LATENCY_BUCKETS,
                &["route", "method", "status"],
            ),
            inbox_pending: int_gauge("inbox_pending", "Inbox events waiting for the worker."),
            inbox_failed: int_gauge(
                "inbox_failed",
                "Inbox events that exhausted their attempts.",
            ),
            inbox_retrying: int_gauge(
                "inbox_retrying",
                "Pending inbox events that failed at least once and wait for a retry.",
            ),
            inbox_depth: int_gauge_vec(
                "inbox_depth",
                "Inbox events not yet processed (pending or in hand), by profile.",
                &["profile"],
            ),
            inbox_oldest_age: gauge_vec(
                "inbox_oldest_pending_age_seconds",
                "Age of the oldest inbox event not yet processed, by profile (0 when none).",
                &["profile"],
            ),
            events_processed: counter_vec(
                "events_processed_total",
                "Inbox events processed by the worker.",
                &["profile", "event_type", "outcome"],
            ),
            worker_events_per_second: gauge(
                "worker_events_per_second",
                "Inbox events the worker finished per second, averaged over the last 10 seconds.",
            ),
            worker_rate: Arc::new(RateMeter::default()),
            store_errors: counter_vec("store_errors_total", "Failed store operations.", &["op"]),
            commit_batch_size: histogram_vec(
                "inbox_commit_batch_size",
                "Events per group-commit transaction.",
                BATCH_BUCKETS,
                &["backend"],
            ),
            turns_finished: counter_vec(
                "turns_finished_total",
                "Turns that ended, by outcome (answered, stopped, agent_failed, …).",
                &["profile", "outcome"],
            ),
            handoffs: counter_vec(
                "handoffs_total",
                "Handoffs between the hub's bots, by outcome (started, refused, cut_hops, …).",
                &["outcome"],
            ),
            http_connections: int_gauge(
                "http_connections",
                "HTTP connections being served now (at most server.max_connections).",
            ),
            http_connections_peak: int_gauge(
                "http_connections_peak",
                "Most HTTP connections served at once since start (at most server.max_connections).",
            ),
            http_connections_closed: http_connections_closed(),
        };
        m.register_all();
        m
    }

    fn register_all(&self) {
        let collectors: [Box<dyn prometheus::core::Collector>; 16] = [
            Box::new(self.webhook_requests.clone()),
            Box::new(self.http_duration.clone()),
            Box::new(self.inbox_pending.clone()),
            Box::new(self.inbox_failed.clone()),
            Box::new(self.inbox_retrying.clone()),
            Box::new(self.inbox_depth.clone()),
            Box::new(self.inbox_oldest_age.clone()),
            Box::new(self.events_processed.clone()),
            Box::new(self.worker_events_per_second.clone()),
            Box::new(self.store_errors.clone()),
            Box::new(self.commit_batch_size.clone()),
            Box::new(self.turns_finished.clone()),
            Box::new(self.handoffs.clone()),
            Box::new(self.http_connections.clone()),
            Box::new(self.http_connections_peak.clone()),
            Box::new(self.http_connections_closed.clone()),
        ];
        for c in collectors {
            self.registry.register(c).expect("metric names are unique");
        }
    }

    /// Counts one failed store operation.
    pub fn store_error(&self, op: &str) {
        self.store_errors.with_label_values(&[op]).inc();
    }

    /// The text exposition format (version 0.0.4).
    pub fn render(&self) -> String {
        let mut buf = Vec::new();
        if TextEncoder::new()
            .encode(&self.registry.gather(), &mut buf)
            .is_err()
        {
            return String::new();
        }
        String::from_utf8(buf).unwrap_or_default()
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

/// Buckets of `http_request_duration_seconds`.
const LATENCY_BUCKETS: &[f64] = &[
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0,
];

/// Buckets of `inbox_commit_batch_size`.
const BATCH_BUCKETS: &[f64] = &[1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0];

// The metrics' names, help and labels are fixed strings, so making one cannot fail.

fn counter_vec(name: &str, help: &str, labels: &[&str]) -> IntCounterVec {
    IntCounterVec::new(Opts::new(name, help), labels).expect("valid metric")
}

fn int_gauge(name: &str, help: &str) -> IntGauge {
    IntGauge::new(name, help).expect("valid metric")
}

fn int_gauge_vec(name: &str, help: &str, labels: &[&str]) -> IntGaugeVec {
    IntGaugeVec::new(Opts::new(name, help), labels).expect("valid metric")
}

fn gauge(name: &str, help: &str) -> Gauge {
    Gauge::new(name, help).expect("valid metric")
}

fn gauge_vec(name: &str, help: &str, labels: &[&str]) -> GaugeVec {
    GaugeVec::new(Opts::new(name, help), labels).expect("valid metric")
}

fn histogram_vec(name: &str, help: &str, buckets: &[f64], labels: &[&str]) -> HistogramVec {
    HistogramVec::new(
        HistogramOpts::new(name, help).buckets(buckets.to_vec()),
        labels,
    )
    .expect("valid metric")
}

/// `http_connections_closed_total`, every reason present from the start (at 0).
fn http_connections_closed() -> IntCounterVec {
    let closed = counter_vec(
        "http_connections_closed_total",
        "Connections the server closed: a time limit passed, or evicted to make room \
         at max_connections.",
        &["reason"],
    );
    for reason in ["header_timeout", "body_timeout", "idle_timeout", "evicted"] {
        closed.with_label_values(&[reason]);
    }
    closed
}
