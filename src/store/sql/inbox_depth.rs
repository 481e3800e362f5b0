//! How deep the inbox is, read in one pass: the counts by status of `/status` and
//! `/metrics`, and each profile's backlog with its oldest arrival.

use std::collections::BTreeMap;

use crate::{
    store::{InboxCounts, InboxDepth, ProfileBacklog},
    util::UnixMs,
};

/// One row per status and profile among the unfinished and failed rows, through the
/// status index `(status, profile, received_at, attempts)`: its cost follows the size
/// of those states, not of the whole history. One pass serves both the counts and the
/// backlog (on Postgres each pass also visits the rows that the index of an unvacuumed
/// table still points to, which under a drain is most of the cost).
pub(crate) const DEPTH: &str = "SELECT status, profile, COUNT(*) AS n, \
     COUNT(CASE WHEN attempts > 0 THEN 1 END) AS retried, MIN(received_at) AS oldest \
     FROM inbox_events WHERE status IN ('pending', 'processing', 'failed') \
     GROUP BY status, profile";

/// A row of [`DEPTH`]: status, profile, rows, rows with an attempt behind them, oldest
/// arrival.
pub(crate) type DepthRow = (String, String, i64, i64, UnixMs);

/// The counts and the backlog (pending and in hand, per profile in name order) of
/// [`DEPTH`]'s rows.
pub(crate) fn depth_of(rows: Vec<DepthRow>) -> InboxDepth {
    let mut counts = InboxCounts::default();
    let mut backlog: BTreeMap<String, ProfileBacklog> = BTreeMap::new();
    for (status, profile, n, retried, oldest) in rows {
        match status.as_str() {
            "pending" => {
                counts.pending += n;
                counts.retrying += retried;
            }
            "processing" => counts.processing += n,
            _ => {
                counts.failed += n;
                continue;
            }
        }
        let b = backlog
            .entry(profile.clone())
            .or_insert_with(|| ProfileBacklog {
                profile,
                depth: 0,
                oldest_received_at: None,
            });
        b.depth += n;
        b.oldest_received_at = Some(b.oldest_received_at.map_or(oldest, |o| o.min(oldest)));
    }
    InboxDepth {
        counts,
        backlog: backlog.into_values().collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(status: &str, profile: &str, n: i64, retried: i64, oldest: i64) -> DepthRow {
        (status.into(), profile.into(), n, retried, UnixMs(oldest))
    }

    #[test]
    fn counts_every_state_and_keeps_failed_rows_out_of_the_backlog() {
        let depth = depth_of(vec![
            row("processing", "b", 2, 2, 40),
            row("pending", "b", 5, 1, 70),
            row("failed", "c", 3, 3, 10),
            row("pending", "a", 1, 0, 90),
        ]);
        let counts = InboxCounts {
            pending: 6,
            processing: 2,
            failed: 3,
            retrying: 1,
        };
        assert_eq!(depth.counts, counts);
        let backlog: Vec<(&str, i64, Option<UnixMs>)> = depth
            .backlog
            .iter()
            .map(|b| (b.profile.as_str(), b.depth, b.oldest_received_at))
            .collect();
        assert_eq!(
            backlog,
            [("a", 1, Some(UnixMs(90))), ("b", 7, Some(UnixMs(40)))]
        );
    }

    #[test]
    fn an_empty_inbox_has_no_backlog() {
        assert_eq!(depth_of(Vec::new()), InboxDepth::default());
    }
}
