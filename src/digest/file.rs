//! The day's digest file, `<dir>/digest/<date>.md`: each session's summary and status,
//! written atomically (a temporary file, flushed, then renamed over the old one), so a
//! reader sees the whole file or none of it.

use std::{
    collections::HashMap,
    fmt::Write as _,
    io::Write as _,
    path::{Path, PathBuf},
};

use crate::store::{DigestReason, DigestRow, DigestStatus};

/// Where the digest of `date` goes under `dir`.
pub fn path(dir: &Path, date: &str) -> PathBuf {
    dir.join("digest").join(format!("{date}.md"))
}

/// The file's text.
pub fn render(date: &str, timezone: &str, digests: &[DigestRow]) -> String {
    render_named(date, timezone, digests, &HashMap::new())
}

/// [`render`], each session headed by its chat's name in `chats` (by profile and chat
/// id) when it has one.
pub fn render_named(
    date: &str,
    timezone: &str,
    digests: &[DigestRow],
    chats: &HashMap<(String, String), String>,
) -> String {
    let count = |s: DigestStatus| digests.iter().filter(|d| d.status == s).count();
    let mut out = format!("# Digest {date}\n\n");
    let _ = writeln!(
        out,
        "Time zone {timezone}. {} session(s): {} reset, {} to be reset, {} kept, {} reset failed.\n",
        digests.len(),
        count(DigestStatus::Reset),
        count(DigestStatus::Written),
        count(DigestStatus::Kept),
        count(DigestStatus::ResetFailed),
    );
    for d in digests {
        // The chat by its name, where it has one, in the session key.
        let heading = match chats.get(&(d.profile.clone(), d.chat_id.clone())) {
            Some(name) if !d.chat_id.is_empty() => d.session_key.replacen(&d.chat_id, name, 1),
            _ => d.session_key.clone(),
        };
        let _ = writeln!(out, "## {} · {heading}\n", d.profile);
        let _ = writeln!(out, "- status: {}", status_line(d));
        let _ = writeln!(
            out,
            "- chat {} · {} message(s) · {} character(s) · session {}\n",
            d.chat_id, d.messages, d.chars, d.session_id
        );
        match &d.summary {
            Some(s) => {
                let _ = writeln!(out, "{s}\n");
            }
            None => {
                let _ = writeln!(out, "(no summary)\n");
            }
        }
    }
    out
}

/// A digest's status in words: what happened to its session, and why.
pub fn status_line(d: &DigestRow) -> String {
    let why = reason_words(d.reason);
    let detail = d
        .detail
        .as_deref()
        .map(|x| format!(" ({x})"))
        .unwrap_or_default();
    match d.status {
        DigestStatus::Written => match d.reason {
            DigestReason::Short => {
                "written; to be reset without a summary (under 40 characters)".into()
            }
            _ => "written; the session is reset once this file is on disk".into(),
        },
        DigestStatus::Reset => match (d.reason, &d.new_session_id) {
            (DigestReason::Short, Some(id)) => {
                format!("reset without a summary (under 40 characters); new session {id}")
            }
            (_, Some(id)) => format!("reset; new session {id}"),
            (_, None) => "reset".into(),
        },
        DigestStatus::Kept => format!("kept, untouched: {why}{detail}"),
        DigestStatus::ResetFailed => format!("kept, untouched: the reset failed, {why}{detail}"),
    }
}

/// A reason in words.
pub fn reason_words(r: DigestReason) -> &'static str {
    match r {
        DigestReason::Summarized => "summarized",
        DigestReason::Short => "under 40 characters",
        DigestReason::SummarizerError => "the summarizer failed",
        DigestReason::SummarizerTimeout => "the summarizer timed out",
        DigestReason::EmptySummary => "the summary was empty",
        DigestReason::UnreadableTranscript => "the day's text could not be read",
        DigestReason::NoApiKey => "no API key (FEISHU_BRIDGE_DIGEST_API_KEY)",
        DigestReason::FileWriteFailed => "the digest file could not be written",
        DigestReason::SessionGone => "the session was gone",
        DigestReason::DatabaseError => "the database failed",
    }
}

/// Writes `text` to `path` atomically; the error says what failed where.
pub async fn write(path: PathBuf, text: String) -> Result<(), String> {
    tokio::task::spawn_blocking(move || write_now(&path, &text))
        .await
        .map_err(|e| format!("the digest writer stopped: {e}"))?
}

fn write_now(path: &Path, text: &str) -> Result<(), String> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let fail = |what: &str, at: &Path, e: std::io::Error| format!("{what} {}: {e}", at.display());
    std::fs::create_dir_all(dir).map_err(|e| fail("cannot create", dir, e))?;
    let tmp = path.with_extension(format!("md.tmp-{}", std::process::id()));
    let result = (|| {
        let mut f = std::fs::File::create(&tmp).map_err(|e| fail("cannot create", &tmp, e))?;
        f.write_all(text.as_bytes())
            .and_then(|()| f.sync_all())
            .map_err(|e| fail("cannot write", &tmp, e))?;
        std::fs::rename(&tmp, path).map_err(|e| fail("cannot rename onto", path, e))?;
        // The rename itself is durable once the directory is.
        if let Ok(d) = std::fs::File::open(dir) {
            let _ = d.sync_all();
        }
        Ok(())
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::util::UnixMs;

    fn digest(status: DigestStatus, reason: DigestReason) -> DigestRow {
        DigestRow {
            id: 1,
            date: "2026-12-02".into(),
            profile: "planner".into(),
            session_key: "group:oc_1".into(),
            session_id: "s-1".into(),
            chat_id: "oc_1".into(),
            chars: 120,
            messages: 4,
            last_event_id: 9,
            summary: Some("They agreed on Friday.".into()),
            status,
            reason,
            detail: Some("the summarizer answered 500".into()),
            new_session_id: Some("s-2".into()),
            created_at: UnixMs(0),
            updated_at: UnixMs(0),
        }
    }

    #[test]
    fn the_file_says_each_sessions_summary_and_status() {
        let rows = [
            digest(DigestStatus::Reset, DigestReason::Summarized),
            digest(DigestStatus::Kept, DigestReason::SummarizerError),
        ];
        let text = render("2026-12-02", "UTC", &rows);
        assert!(text.starts_with("# Digest 2026-12-02\n"), "{text}");
        assert!(
            text.contains("2 session(s): 1 reset, 0 to be reset, 1 kept"),
            "{text}"
        );
        assert!(text.contains("- status: reset; new session s-2"), "{text}");
        assert!(
            text.contains(
                "- status: kept, untouched: the summarizer failed (the summarizer answered 500)"
            ),
            "{text}"
        );
        assert!(text.contains("They agreed on Friday."));
    }

    #[test]
    fn writing_replaces_the_file_whole_or_says_why_not() {
        let dir = tempfile::tempdir().expect("temp dir");
        let p = path(dir.path(), "2026-12-02");
        write_now(&p, "one").expect("written");
        write_now(&p, "two").expect("rewritten");
        assert_eq!(std::fs::read_to_string(&p).expect("read"), "two");
        let names: Vec<_> = std::fs::read_dir(p.parent().expect("dir"))
            .expect("list")
            .map(|e| e.expect("entry").file_name())
            .collect();
        assert_eq!(names.len(), 1, "no temporary file is left: {names:?}");
        // A file where the directory should be.
        let blocked = dir.path().join("blocked");
        std::fs::write(&blocked, "x").expect("file");
        let e = write_now(&path(&blocked, "2026-12-02"), "x").expect_err("cannot write");
        assert!(e.starts_with("cannot create"), "{e}");
    }
}
