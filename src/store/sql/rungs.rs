//! Statements whose text grows with their rows (multi-row inserts, `IN` lists) are
//! written for a few row counts only. A run of rows goes in pieces of those counts, so
//! every such statement is one of a few texts that a connection prepares once and keeps
//! (sqlx's statement cache), where a statement written for each run's own length was
//! parsed and planned again for every batch the worker wrote.

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

#[cfg(test)]
mod tests {
    use super::rungs;

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
}
