//! Statements whose text grows with their rows (multi-row inserts, `IN` lists) are
//! written for a few row counts only. A run of rows goes in pieces of those counts, so
//! every such statement is one of a few texts that a connection prepares once and keeps
//! (sqlx's statement cache), where a statement written for each run's own length was
//! parsed and planned again for every batch. A statement that must stay one is padded
//! to the next of those counts instead.

use std::{borrow::Cow, sync::OnceLock};

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

/// A statement's texts for each of [`COUNTS`], written once per process and per
/// placeholder style (`numbered`: `$n`, else `?`) by `build(rows, numbered)`; a run over
/// the largest count (an unpadded group commit) gets a text of its own. Keeps the
/// writing of thousands of placeholders off every batch.
pub(crate) struct Texts {
    build: fn(usize, bool) -> String,
    numbered: OnceLock<Vec<String>>,
    anonymous: OnceLock<Vec<String>>,
}

impl Texts {
    /// The texts `build` writes, none written yet.
    pub(crate) const fn new(build: fn(usize, bool) -> String) -> Self {
        Self {
            build,
            numbered: OnceLock::new(),
            anonymous: OnceLock::new(),
        }
    }

    /// The text for `rows` rows.
    pub(crate) fn get(&self, rows: usize, numbered: bool) -> Cow<'_, str> {
        let Some(at) = COUNTS.iter().position(|&c| c == rows) else {
            return Cow::Owned((self.build)(rows, numbered));
        };
        let texts = if numbered {
            &self.numbered
        } else {
            &self.anonymous
        };
        let texts = texts.get_or_init(|| COUNTS.map(|c| (self.build)(c, numbered)).to_vec());
        Cow::Borrowed(&texts[at])
    }
}

#[cfg(test)]
mod tests {
    use super::{COUNTS, Texts, rungs};

    fn lengths(n: usize) -> Vec<usize> {
        let rows: Vec<usize> = (0..n).collect();
        let pieces: Vec<&[usize]> = rungs(&rows).collect();
        // Every row once, in order.
        assert_eq!(pieces.concat(), rows);
        pieces.iter().map(|p| p.len()).collect()
    }

    #[test]
    fn each_count_s_text_is_written_once_and_any_other_length_as_asked() {
        fn build(rows: usize, numbered: bool) -> String {
            format!("{rows}{}", if numbered { "$" } else { "?" })
        }
        let texts = Texts::new(build);
        assert_eq!(texts.get(32, true), "32$");
        assert_eq!(texts.get(32, false), "32?");
        let first = texts.get(256, false);
        assert!(std::ptr::eq(first.as_ptr(), texts.get(256, false).as_ptr()));
        assert!(matches!(texts.get(300, true), std::borrow::Cow::Owned(t) if t == "300$"));
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
