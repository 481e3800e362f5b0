//! The batched feed's metrics: segments packed, attached and read per profile, and how
//! many wait (items gathered, segments waiting for room, attached unread), read from the
//! database at scrape time.

use prometheus::{IntCounterVec, IntGaugeVec, Opts, Registry};

/// The feed's metrics.
#[derive(Clone)]
pub struct FeedMetrics {
    /// Segments packed, by profile.
    pub packed: IntCounterVec,
    /// Segments attached to their session, by profile.
    pub attached: IntCounterVec,
    /// Segments a turn read, by profile.
    pub read: IntCounterVec,
    /// What waits, by profile and what (`gathered` items, `waiting` and `attached`
    /// segments), refreshed at scrape.
    pub pending: IntGaugeVec,
}

impl FeedMetrics {
    /// The metrics, registered in `registry`.
    pub(super) fn registered(registry: &Registry) -> Self {
        let counter = |name: &str, help: &str| {
            IntCounterVec::new(Opts::new(name, help), &["profile"]).expect("valid metric")
        };
        let packed = counter("feed_segments_packed_total", "Feed segments packed.");
        let attached = counter(
            "feed_segments_attached_total",
            "Feed segments attached to their session (without waking its agent).",
        );
        let read = counter("feed_segments_read_total", "Feed segments a turn used.");
        let pending = IntGaugeVec::new(
            Opts::new(
                "feed_pending",
                "Feed items gathered but not packed, and segments waiting or attached unread.",
            ),
            &["profile", "what"],
        )
        .expect("valid metric");
        for c in [
            Box::new(packed.clone()) as Box<dyn prometheus::core::Collector>,
            Box::new(attached.clone()),
            Box::new(read.clone()),
            Box::new(pending.clone()),
        ] {
            registry.register(c).expect("metric names are unique");
        }
        Self {
            packed,
            attached,
            read,
            pending,
        }
    }
}
