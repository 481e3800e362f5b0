//! The file a `sqlite:` database URL names, and where a relative one lives.
//!
//! A relative path written in a config file is read from that file's directory, so
//! `--config examples/demo.toml` finds the same database from wherever it is run. Only a
//! `database.url` the file itself writes moves: the built-in default and `DATABASE_URL`
//! stay relative to the working directory, which the systemd unit and the container
//! image make their state directory. The URL is read the way sqlx reads it: the part
//! after `sqlite://` (or `sqlite:`) up to a `?` is the file, percent-decoded; `:memory:`
//! and `mode=memory` name no file.

use std::path::{Path, PathBuf};

use secrecy::{ExposeSecret, SecretString};

use super::{Config, DatabaseConfig};

impl DatabaseConfig {
    /// The file of a SQLite URL, as the store will open it; `None` for Postgres or an
    /// in-memory database.
    pub fn sqlite_file(&self) -> Option<PathBuf> {
        let (file, _) = split(self.url.expose_secret())?;
        Some(PathBuf::from(percent_decoded(file)?))
    }
}

/// `%XX` sequences decoded, as sqlx decodes the file part; `None` when the result is not
/// UTF-8 (sqlx refuses such a URL too).
fn percent_decoded(s: &str) -> Option<String> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let hex = b
            .get(i + 1..i + 3)
            .filter(|h| b[i] == b'%' && h.iter().all(u8::is_ascii_hexdigit))
            .and_then(|h| std::str::from_utf8(h).ok());
        match hex.map(|h| u8::from_str_radix(h, 16)) {
            Some(Ok(byte)) => {
                out.push(byte);
                i += 3;
            }
            _ => {
                out.push(b[i]);
                i += 1;
            }
        }
    }
    String::from_utf8(out).ok()
}

/// Moves a relative SQLite path that `text` writes as `database.url` into `dir`, the
/// directory of the file `text` was read from.
pub(super) fn in_file_dir(config: &mut Config, text: &str, dir: &Path) {
    let written = text
        .parse::<toml::Table>()
        .ok()
        .and_then(|t| t.get("database")?.as_table()?.get("url").cloned())
        .is_some();
    if !written {
        return;
    }
    if let Some(url) = relative_to(config.database.url.expose_secret(), dir) {
        config.database.url = SecretString::from(url);
    }
}

/// `url` with its relative SQLite file under `dir`; `None` when nothing moves: not
/// SQLite, in memory, already absolute, `dir` empty (the working directory itself), or
/// `dir` not UTF-8 (a URL cannot name it).
fn relative_to(url: &str, dir: &Path) -> Option<String> {
    let (file, query) = split(url)?;
    if Path::new(file).is_absolute() || dir.as_os_str().is_empty() {
        return None;
    }
    let mut out = String::from("sqlite://");
    for c in dir.to_str()?.chars() {
        // sqlx percent-decodes the path and ends it at the first `?`.
        match c {
            '%' => out.push_str("%25"),
            '?' => out.push_str("%3F"),
            c => out.push(c),
        }
    }
    if !out.ends_with('/') {
        out.push('/');
    }
    out.push_str(file);
    if let Some(q) = query {
        out.push('?');
        out.push_str(q);
    }
    Some(out)
}

/// The file part (still percent-encoded) and the query of a SQLite URL that names a
/// file.
fn split(url: &str) -> Option<(&str, Option<&str>)> {
    let rest = url
        .strip_prefix("sqlite://")
        .or_else(|| url.strip_prefix("sqlite:"))?;
    let (file, query) = match rest.split_once('?') {
        Some((f, q)) => (f, Some(q)),
        None => (rest, None),
    };
    let in_memory = query.is_some_and(|q| {
        url::form_urlencoded::parse(q.as_bytes()).any(|(k, v)| k == "mode" && v == "memory")
    });
    if file.is_empty() || file == ":memory:" || in_memory {
        return None;
    }
    Some((file, query))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relative_files_move_into_the_directory_and_the_rest_stays() {
        let dir = Path::new("/etc/hub");
        let moved = |url: &str| relative_to(url, dir);
        assert_eq!(
            moved("sqlite://hub.db").as_deref(),
            Some("sqlite:///etc/hub/hub.db")
        );
        assert_eq!(
            moved("sqlite:data/hub.db?mode=rwc").as_deref(),
            Some("sqlite:///etc/hub/data/hub.db?mode=rwc")
        );
        assert_eq!(
            relative_to("sqlite://hub.db", Path::new("examples")).as_deref(),
            Some("sqlite://examples/hub.db")
        );
        for stays in [
            "sqlite:///var/lib/hub.db",
            "sqlite::memory:",
            "sqlite://shared?mode=memory",
            "postgres://u@db/hub",
        ] {
            assert_eq!(moved(stays), None, "{stays}");
        }
        assert_eq!(relative_to("sqlite://hub.db", Path::new("")), None);
    }

    #[test]
    fn a_directory_sqlx_would_misread_is_escaped() {
        let url = relative_to("sqlite://hub.db", Path::new("/srv/a?b%c")).expect("moved");
        assert_eq!(url, "sqlite:///srv/a%3Fb%25c/hub.db");
        let config = DatabaseConfig {
            url: SecretString::from(url),
            ..DatabaseConfig::default()
        };
        assert_eq!(
            config.sqlite_file(),
            Some(PathBuf::from("/srv/a?b%c/hub.db"))
        );
    }

    #[test]
    fn only_a_url_the_file_writes_moves() {
        let dir = Path::new("/etc/hub");
        let mut config = Config::default();
        in_file_dir(&mut config, "[server]\nlisten = \"127.0.0.1:8080\"\n", dir);
        assert_eq!(config.database.redacted_url(), "sqlite://feishu-bridge.db");
        config.database.url = SecretString::from("sqlite://x.db");
        in_file_dir(&mut config, "[database]\nurl = \"sqlite://x.db\"\n", dir);
        assert_eq!(config.database.redacted_url(), "sqlite:///etc/hub/x.db");
    }
}
