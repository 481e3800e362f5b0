//! What a configuration problem looks like: the key it is about, what is wrong, and,
//! for a problem found while reading the TOML text, the file, line and column.

use std::{fmt, ops::Deref, path::PathBuf};

/// A configuration problem, naming the key it is about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    /// `profiles[1].encrypt_key`, or empty when the problem is not about one key.
    pub key: String,
    /// What is wrong.
    pub message: String,
    /// The file the problem is in, when it came from one.
    pub file: Option<PathBuf>,
    /// Where in the text, for syntax errors and keys of the wrong type or name.
    pub at: Option<Location>,
}

/// A place in the TOML text: 1-based line and column, and that line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Location {
    /// 1-based line number.
    pub line: usize,
    /// 1-based column, in characters.
    pub column: usize,
    /// The text of that line, without its line break.
    pub text: String,
}

impl Location {
    /// The place of byte offset `offset` in `source` (clamped to the text).
    pub fn of(source: &str, offset: usize) -> Self {
        let mut offset = offset.min(source.len());
        while !source.is_char_boundary(offset) {
            offset -= 1;
        }
        let before = &source[..offset];
        let start = before.rfind('\n').map_or(0, |i| i + 1);
        let end = source[offset..]
            .find('\n')
            .map_or(source.len(), |i| offset + i);
        Self {
            line: before.matches('\n').count() + 1,
            column: source[start..offset].chars().count() + 1,
            text: source[start..end].trim_end_matches('\r').to_string(),
        }
    }

    /// The line with a caret under the column, in the style of rustc and `toml`:
    ///
    /// ```text
    ///    |
    /// 12 | name = "planner
    ///    |        ^
    /// ```
    fn snippet(&self) -> String {
        let number = self.line.to_string();
        let gutter = " ".repeat(number.len());
        // Tabs are copied so that the caret lines up however the terminal shows them.
        let pad: String = self
            .text
            .chars()
            .take(self.column - 1)
            .map(|c| if c == '\t' { '\t' } else { ' ' })
            .collect();
        format!("{gutter} |\n{number} | {}\n{gutter} | {pad}^", self.text)
    }
}

impl ConfigError {
    pub(super) fn new(key: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            key: key.into(),
            message: message.into(),
            file: None,
            at: None,
        }
    }

    /// This error, placed at `at`.
    pub(super) fn at(mut self, at: Location) -> Self {
        self.at = Some(at);
        self
    }
}

/// `file:line:col: key: message`, then the line with a caret when the place is known;
/// the parts that are unknown are left out.
impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (&self.file, &self.at) {
            (Some(file), Some(at)) => write!(f, "{}:{}:{}: ", file.display(), at.line, at.column)?,
            (Some(file), None) => write!(f, "{}: ", file.display())?,
            (None, Some(at)) => write!(f, "line {}, column {}: ", at.line, at.column)?,
            (None, None) => {}
        }
        if !self.key.is_empty() {
            write!(f, "{}: ", self.key)?;
        }
        f.write_str(&self.message)?;
        if let Some(at) = &self.at {
            write!(f, "\n{}", at.snippet())?;
        }
        Ok(())
    }
}

impl std::error::Error for ConfigError {}

/// Every problem found in one configuration, in the order of the checks; never empty.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigErrors(pub Vec<ConfigError>);

impl ConfigErrors {
    /// Names `file` as the place of every problem.
    pub(super) fn in_file(mut self, file: &std::path::Path) -> Self {
        for e in &mut self.0 {
            e.file = Some(file.to_path_buf());
        }
        self
    }

    /// Whether some problem is about `key`.
    pub fn has_key(&self, key: &str) -> bool {
        self.0.iter().any(|e| e.key == key)
    }

    /// The keys of the problems, in order.
    pub fn keys(&self) -> Vec<&str> {
        self.0.iter().map(|e| e.key.as_str()).collect()
    }
}

#[cfg(test)]
impl ConfigErrors {
    /// The one problem; panics, listing them, when there are more.
    pub(super) fn single(self) -> ConfigError {
        assert_eq!(self.0.len(), 1, "expected one problem, got:\n{self}");
        self.0.into_iter().next().expect("never empty")
    }
}

impl From<ConfigError> for ConfigErrors {
    fn from(e: ConfigError) -> Self {
        Self(vec![e])
    }
}

impl Deref for ConfigErrors {
    type Target = [ConfigError];

    fn deref(&self) -> &[ConfigError] {
        &self.0
    }
}

impl<'a> IntoIterator for &'a ConfigErrors {
    type Item = &'a ConfigError;
    type IntoIter = std::slice::Iter<'a, ConfigError>;

    fn into_iter(self) -> Self::IntoIter {
        self.0.iter()
    }
}

/// One problem per line (a problem with a place adds its snippet lines).
impl fmt::Display for ConfigErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, e) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str("\n")?;
            }
            write!(f, "{e}")?;
        }
        Ok(())
    }
}

impl std::error::Error for ConfigErrors {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_location_is_one_based_and_counts_characters() {
        let text = "a = 1\n名前 = \"x\nc = 3\n";
        let offset = text.find('"').expect("quote");
        let at = Location::of(text, offset);
        assert_eq!((at.line, at.column, at.text.as_str()), (2, 6, "名前 = \"x"));
        let start = Location::of(text, 0);
        assert_eq!((start.line, start.column), (1, 1));
        let past = Location::of(text, 10_000);
        assert_eq!((past.line, past.column, past.text.as_str()), (4, 1, ""));
    }

    #[test]
    fn display_puts_file_line_and_column_first_and_a_caret_under_the_column() {
        let e = ConfigError::new("server.listen", "invalid type")
            .at(Location::of("[server]\nlisten = 5\n", 18));
        assert_eq!(
            e.to_string(),
            "line 2, column 10: server.listen: invalid type\n  |\n2 | listen = 5\n  |          ^"
        );
        let in_file = ConfigErrors::from(e).in_file(std::path::Path::new("hub.toml"));
        assert!(
            in_file
                .to_string()
                .starts_with("hub.toml:2:10: server.listen: "),
            "{in_file}"
        );
        let plain = ConfigError::new("worker.lanes", "must be at least 1");
        assert_eq!(plain.to_string(), "worker.lanes: must be at least 1");
    }

    #[test]
    fn a_list_prints_one_problem_per_line() {
        let list = ConfigErrors(vec![
            ConfigError::new("a", "x"),
            ConfigError::new("", "y"),
            ConfigError::new("b.c", "z"),
        ]);
        assert_eq!(list.to_string(), "a: x\ny\nb.c: z");
        assert_eq!(list.keys(), ["a", "", "b.c"]);
        assert!(list.has_key("b.c") && !list.has_key("b"));
    }
}
