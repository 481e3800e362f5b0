//! Keeping client and message text out of errors, logs and `/status`.
//!
//! Two tools: [`echo`] bounds any piece of client input an error message repeats, and
//! [`decode`] decodes JSON and query strings, telling a failure by its kind and path
//! without the value that caused it. No HTTP framework and no database here.

pub mod decode;

/// The most characters of client input an error message repeats.
pub const ECHO_MAX_CHARS: usize = 64;

/// `text` cut to at most `max` characters; a cut ends in `…` (counted in `max`), and
/// control characters become `?` so an echo cannot break a log line.
pub fn bounded(text: &str, max: usize) -> String {
    let clean = |c: char| if c.is_control() { '?' } else { c };
    if text.chars().count() <= max {
        return text.chars().map(clean).collect();
    }
    let mut out: String = text
        .chars()
        .take(max.saturating_sub(1))
        .map(clean)
        .collect();
    out.push('…');
    out
}

/// Client input as an error message may repeat it: at most [`ECHO_MAX_CHARS`].
pub fn echo(text: &str) -> String {
    bounded(text, ECHO_MAX_CHARS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_text_is_kept_and_long_text_is_cut_with_an_ellipsis() {
        assert_eq!(echo("planner"), "planner");
        let long = "x".repeat(10_000);
        let cut = echo(&long);
        assert_eq!(cut.chars().count(), ECHO_MAX_CHARS);
        assert!(cut.ends_with('…'));
        assert_eq!(
            echo(&"y".repeat(ECHO_MAX_CHARS)),
            "y".repeat(ECHO_MAX_CHARS)
        );
    }

    #[test]
    fn cuts_fall_on_character_boundaries_and_controls_are_masked() {
        let cut = bounded("飞书飞书飞书", 4);
        assert_eq!(cut, "飞书飞…");
        assert_eq!(bounded("a\nb\u{1b}c", 10), "a?b?c");
    }
}
