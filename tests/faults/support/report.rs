//! A scenario's result: its figures and every invariant that failed, by name. It ends
//! in one summary line per scenario (`faults <name>: PASS|FAIL key=value …`), then one
//! line per failed invariant, and fails the test if any did.

use std::{fmt::Display, path::PathBuf};

/// Figures and failed invariants of one scenario.
pub struct Report {
    name: &'static str,
    out: PathBuf,
    figures: Vec<(String, String)>,
    failures: Vec<String>,
}

impl Report {
    /// An empty report; `out` is where the scenario's logs are.
    pub fn new(name: &'static str, out: PathBuf) -> Self {
        Self {
            name,
            out,
            figures: Vec::new(),
            failures: Vec::new(),
        }
    }

    /// Adds a figure to the summary line.
    pub fn figure(&mut self, key: &str, value: impl Display) {
        self.figures.push((key.to_string(), value.to_string()));
    }

    /// Records `invariant` as failed, with what was seen, unless `ok`.
    pub fn check(&mut self, ok: bool, invariant: &str, seen: impl FnOnce() -> String) {
        if !ok {
            self.failures.push(format!("{invariant}: {}", seen()));
        }
    }

    /// A note printed with the result, whatever it is.
    pub fn progress(&self, what: impl Display) {
        eprintln!("faults {}: {what}", self.name);
    }

    /// Prints the summary and the failures; panics if an invariant failed.
    pub fn finish(self) {
        let verdict = if self.failures.is_empty() {
            "PASS"
        } else {
            "FAIL"
        };
        let figures: Vec<String> = self
            .figures
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        println!("faults {}: {verdict} {}", self.name, figures.join(" "));
        for f in &self.failures {
            println!("faults {}:   failed: {f}", self.name);
        }
        if !self.failures.is_empty() {
            println!("faults {}:   logs in {}", self.name, self.out.display());
            panic!(
                "{}: {} invariant(s) failed (see above)",
                self.name,
                self.failures.len()
            );
        }
    }
}

/// A few examples of a list, for a failure message.
pub fn some<T: Display>(items: &[T]) -> String {
    let shown: Vec<String> = items.iter().take(5).map(ToString::to_string).collect();
    let more = items.len().saturating_sub(shown.len());
    if more > 0 {
        format!("{} (and {more} more)", shown.join(", "))
    } else {
        shown.join(", ")
    }
}
