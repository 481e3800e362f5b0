//! Statements whose text grows with their rows (multi-row inserts, `IN` lists) are
//! written for a few row counts only. A run of rows goes in pieces of those counts, so
//! every such statement is one of a few texts that a connection prepares once and keeps
//! (sqlx's statement cache), where a statement written for each run's own length was
//! parsed and planned again for every batch. A statement that must stay one is padded
//! to the next of those counts instead.

/// The row counts, largest first: a run of `n` rows takes one statement per 256 rows
/// and one per set bit of the rest, so a full claim (`worker.batch`, 256 by default)
/// takes one. The largest, 256 rows of the widest insert (17 columns), stays far under
/// either backend's limit on placeholders.
const COUNTS: [usize; 9] = [256, 128, 64, 32, 16, 8, 4, 2, 1];

/// `rows` in order, in pieces of one of [`COUNTS`] rows each.
pub(crate) fn rungs<T>(rows: &[T]) -> impl Iterator<Item = &[T]> {
    let mut rest = rows;
    std::iter::from_fn(move || {
        let n = COUNTS.into_iter().find(|&c| c <= rest.len())?;
        let (piece, tail) = rest.split_at(n);
        rest = tail;
        Some(piece)
    })
}

/// `rows`, then its last row again up to the next of [`COUNTS`], for a statement that
/// must stay one (a group commit: its success is its commit); a run over the largest
/// count is left as it is. The counts are the powers of two up to 256.
pub(crate) fn padded<T>(rows: &[T]) -> Vec<&T> {
    let mut out: Vec<&T> = rows.iter().collect();
    if let Some(last) = rows.last()
        && rows.len() <= COUNTS[0]
    {
        out.resize(rows.len().next_power_of_two(), last);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::{COUNTS, rungs};

    fn lengths(n: usize) -> Vec<usize> {
        let rows: Vec<usize> = (0..n).collect();
        let pieces: Vec<&[usize]> = rungs(&rows).collect();
        // Every row once, in order.
        assert_eq!(pieces.concat(), rows);
        pieces.iter().map(|p| p.len()).collect()
    }

    #[test]
    fn a_run_goes_in_pieces_of_the_fixed_counts_in_order() {
        assert!(lengths(0).is_empty());
        assert_eq!(lengths(1), [1]);
        assert_eq!(lengths(37), [32, 4, 1]);
        assert_eq!(lengths(256), [256]);
        assert_eq!(lengths(600), [256, 256, 64, 16, 8]);
        assert_eq!(lengths(255).len(), 8);
    }

    #[test]
    fn a_run_is_padded_to_the_next_count_with_its_last_row() {
        assert!(COUNTS.iter().all(|c| c.is_power_of_two()));
        let padded = |n: usize| -> Vec<usize> {
            let rows: Vec<usize> = (0..n).collect();
            super::padded(&rows).into_iter().copied().collect()
        };
        assert!(padded(0).is_empty());
        assert_eq!(padded(1), [0]);
        assert_eq!(padded(3), [0, 1, 2, 2]);
        assert_eq!(padded(4), [0, 1, 2, 3]);
        assert_eq!(padded(5).len(), 8);
        assert_eq!(padded(256).len(), 256);
        assert_eq!(padded(300).len(), 300);
    }
}
