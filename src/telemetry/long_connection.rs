//! The long connection's metrics: whether each profile's connection is up, how often it
//! was made again, the frames each way, and how long an event waited for its
//! acknowledgement (receipt of its last fragment to the acknowledgement written).

use prometheus::{HistogramOpts, HistogramVec, IntCounterVec, IntGaugeVec, Opts, Registry};

/// The long-connection metrics.
#[derive(Clone)]
pub struct LongConnMetrics {
    /// 1 while the profile's connection is up.
    pub connected: IntGaugeVec,
    /// Connections made again after one ended or failed, by profile.
    pub reconnects: IntCounterVec,
    /// Frames by profile, direction (`in`/`out`) and type (`ping`, `pong`, `event`,
    /// `card`, `ack`, `other`).
    pub frames: IntCounterVec,
    /// Seconds from an event's last fragment to its acknowledgement, by profile and code.
    pub ack_seconds: HistogramVec,
}

impl LongConnMetrics {
    /// The metrics, registered in `registry`.
    pub(super) fn registered(registry: &Registry) -> Self {
        let connected = IntGaugeVec::new(
            Opts::new(
                "long_connection_connected",
                "1 while the profile's long connection to Feishu is up, else 0.",
            ),
            &["profile"],
        )
        .expect("valid metric");
        let reconnects = IntCounterVec::new(
            Opts::new(
                "long_connection_reconnects_total",
                "Long connections made again after one ended or failed.",
            ),
            &["profile"],
        )
        .expect("valid metric");
        let frames = IntCounterVec::new(
            Opts::new(
                "long_connection_frames_total",
                "Long-connection frames by direction and type.",
            ),
            &["profile", "direction", "type"],
        )
        .expect("valid metric");
        let ack_seconds = HistogramVec::new(
            HistogramOpts::new(
                "long_connection_ack_seconds",
                "From an event's last fragment to its acknowledgement (stored first).",
            )
            .buckets(vec![
                0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
            ]),
            &["profile", "code"],
        )
        .expect("valid metric");
        for c in [
            Box::new(connected.clone()) as Box<dyn prometheus::core::Collector>,
            Box::new(reconnects.clone()),
            Box::new(frames.clone()),
            Box::new(ack_seconds.clone()),
        ] {
            registry.register(c).expect("metric names are unique");
        }
        Self {
            connected,
            reconnects,
            frames,
            ack_seconds,
        }
    }
}
