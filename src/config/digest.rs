//! `[digest]`: the daily digest (off unless enabled) — when it runs, in which time zone,
//! where its Markdown files go, and the OpenAI-compatible summarizer it asks.

use std::{path::PathBuf, time::Duration};

use jiff::{civil::Time, tz::TimeZone};
use secrecy::SecretString;
use serde::Deserialize;

use super::problems::Problems;

/// `[digest]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct DigestConfig {
    /// Run the digest every day.
    pub enabled: bool,
    /// Local time the day's digest starts, `HH:MM`.
    pub at: String,
    /// IANA time zone name of `at`, `window_end` and the digest's date; UTC when not
    /// set (which `check-config` warns about: see [`DigestConfig::timezone_name`]).
    pub timezone: Option<String>,
    /// A run that would start at or after this local time is skipped that day (the
    /// process was down through the window): sessions are never reset during the day.
    pub window_end: String,
    /// Where `digest/<date>.md` is written; the database holds every digest either way.
    pub dir: Option<PathBuf>,
    /// Digest direct-message (p2p) sessions too, not only group ones.
    pub include_dms: bool,
    /// A reset session's next turn is given its digest first ("Earlier in this chat").
    pub carry_over: bool,
    /// Where each day's digests are posted once written: nowhere, to their chat, or to
    /// the chat's workspace owner.
    pub post: DigestPost,
    /// The model that writes the summaries.
    pub summarizer: SummarizerConfig,
}

/// `digest.post`: where a session's digest is posted once written.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DigestPost {
    /// Not posted.
    #[default]
    None,
    /// To the session's chat.
    Chat,
    /// To the owner of the chat's workspace, as a private message.
    Owner,
}

impl DigestPost {
    /// Its spelling in the config.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::None => "none",
            Self::Chat => "chat",
            Self::Owner => "owner",
        }
    }
}

impl Default for DigestConfig {
    fn default() -> Self {
        Self {
            enabled: false,
            at: "04:10".into(),
            timezone: None,
            window_end: "08:00".into(),
            dir: None,
            include_dms: true,
            carry_over: true,
            post: DigestPost::None,
            summarizer: SummarizerConfig::default(),
        }
    }
}

/// `[digest.summarizer]`: an OpenAI-compatible chat-completions endpoint.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SummarizerConfig {
    /// API base, e.g. `http://127.0.0.1:11434/v1`; `/chat/completions` is appended.
    pub base_url: String,
    /// Model name.
    pub model: String,
    /// How long one summary may take.
    pub timeout_secs: u64,
    /// API key; only from env `FEISHU_BRIDGE_DIGEST_API_KEY`, never from the file.
    #[serde(skip)]
    pub api_key: Option<SecretString>,
}

impl Default for SummarizerConfig {
    fn default() -> Self {
        Self {
            base_url: String::new(),
            model: String::new(),
            timeout_secs: 60,
            api_key: None,
        }
    }
}

impl SummarizerConfig {
    /// How long one summary may take.
    pub fn timeout(&self) -> Duration {
        Duration::from_secs(self.timeout_secs)
    }
}

impl DigestConfig {
    /// The name of the time zone in force: `timezone`, else `UTC`.
    pub fn timezone_name(&self) -> &str {
        self.timezone.as_deref().unwrap_or(DEFAULT_TIMEZONE)
    }

    /// The time zone in force (validated at load; UTC should it not parse).
    pub fn tz(&self) -> TimeZone {
        TimeZone::get(self.timezone_name()).unwrap_or(TimeZone::UTC)
    }

    /// The warning `check-config` and `serve` give when the digest runs with no
    /// `timezone` set: it then runs at `at` UTC, which is rarely the night where the
    /// chats are (04:10 UTC is midday in China).
    pub(super) fn warning(&self) -> Option<String> {
        if !self.enabled || self.timezone.is_some() {
            return None;
        }
        // China has no daylight saving time, so any date gives the same clock time.
        let shanghai = self
            .start()
            .to_datetime(jiff::civil::date(2026, 1, 1))
            .to_zoned(TimeZone::UTC)
            .ok()
            .and_then(|z| z.in_tz("Asia/Shanghai").ok())
            .map(|z| format!(" ({} in Asia/Shanghai)", z.strftime("%H:%M")))
            .unwrap_or_default();
        Some(format!(
            "digest.timezone: not set, so the digest runs at {at} {DEFAULT_TIMEZONE}{shanghai} \
             and sessions are reset then; set digest.timezone to the IANA name of the chats' \
             zone, e.g. timezone = \"Asia/Shanghai\"",
            at = self.at,
        ))
    }

    /// `at` as a local time (validated at load).
    pub fn start(&self) -> Time {
        parse_time(&self.at).unwrap_or(Time::midnight())
    }

    /// `window_end` as a local time (validated at load).
    pub fn end(&self) -> Time {
        parse_time(&self.window_end).unwrap_or(Time::MAX)
    }
}

/// The time zone of a digest whose `timezone` is not set.
const DEFAULT_TIMEZONE: &str = "UTC";

/// `HH:MM`.
fn parse_time(s: &str) -> Option<Time> {
    let (h, m) = s.split_once(':')?;
    let digits = |p: &str, most: usize| {
        (1..=most).contains(&p.len()) && p.bytes().all(|b| b.is_ascii_digit())
    };
    if !digits(h, 2) || !digits(m, 2) || m.len() != 2 {
        return None;
    }
    Time::new(h.parse().ok()?, m.parse().ok()?, 0, 0).ok()
}

/// The checks of `[digest]`, each naming its key.
pub(super) fn validate(d: &DigestConfig, out: &mut Problems) {
    let mut hhmm = |key: &str, v: &str| {
        let t = parse_time(v);
        out.require(t.is_some(), format!("digest.{key}"), || {
            format!("expected a local time HH:MM, e.g. \"04:10\"; got {v:?}")
        });
        t
    };
    let start = hhmm("at", &d.at);
    let end = hhmm("window_end", &d.window_end);
    if let (Some(start), Some(end)) = (start, end) {
        out.require(start < end, "digest.window_end", || {
            format!(
                "must be later the same day than digest.at ({}); the window may not cross midnight",
                d.at
            )
        });
    }
    if let Some(tz) = &d.timezone {
        out.require(TimeZone::get(tz).is_ok(), "digest.timezone", || {
            format!(
                "unknown time zone {tz:?}: expected an IANA name such as \"Asia/Shanghai\" or \"UTC\""
            )
        });
    }
    if d.enabled {
        let s = &d.summarizer;
        let url = url::Url::parse(&s.base_url);
        out.require(
            matches!(url.as_ref().map(url::Url::scheme), Ok("http" | "https")),
            "digest.summarizer.base_url",
            || {
                "the digest needs an http(s) URL of an OpenAI-compatible API, e.g. http://127.0.0.1:11434/v1"
                    .into()
            },
        );
        out.require(
            !s.model.trim().is_empty(),
            "digest.summarizer.model",
            || "the digest needs the summarizer's model name".into(),
        );
        out.require(s.timeout_secs > 0, "digest.summarizer.timeout_secs", || {
            "must be positive".into()
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_are_hh_mm() {
        assert_eq!(parse_time("04:10"), Some(Time::constant(4, 10, 0, 0)));
        assert_eq!(parse_time("4:05"), Some(Time::constant(4, 5, 0, 0)));
        for bad in ["", "04", "24:00", "04:60", "ab:cd", "004:10", "04:10:00"] {
            assert_eq!(parse_time(bad), None, "{bad}");
        }
    }

    /// The keys of the problems `validate` finds in `d`.
    fn keys(d: &DigestConfig) -> Vec<String> {
        let mut out = Problems::default();
        validate(d, &mut out);
        out.into_vec().into_iter().map(|e| e.key).collect()
    }

    #[test]
    fn each_problem_names_its_key() {
        let check = |f: fn(&mut DigestConfig)| {
            let mut d = DigestConfig::default();
            f(&mut d);
            keys(&d)
        };
        assert_eq!(
            check(|_| {}),
            Vec::<String>::new(),
            "the defaults are valid while off"
        );
        assert_eq!(check(|d| d.at = "4h".into()), ["digest.at"]);
        assert_eq!(
            check(|d| d.window_end = "03:00".into()),
            ["digest.window_end"]
        );
        assert_eq!(
            check(|d| d.timezone = Some("Mars/Olympus".into())),
            ["digest.timezone"]
        );
        assert_eq!(
            check(|d| d.enabled = true),
            ["digest.summarizer.base_url", "digest.summarizer.model"]
        );
        assert_eq!(
            check(|d| {
                d.enabled = true;
                d.summarizer.base_url = "http://127.0.0.1:1/v1".into();
            }),
            ["digest.summarizer.model"]
        );
        let mut d = DigestConfig {
            timezone: Some("Asia/Shanghai".into()),
            ..DigestConfig::default()
        };
        assert!(keys(&d).is_empty());
        d.timezone = Some("UTC".into());
        assert_eq!(d.tz(), TimeZone::UTC);
        d.timezone = None;
        assert_eq!((d.tz(), d.timezone_name()), (TimeZone::UTC, "UTC"));
    }

    #[test]
    fn an_enabled_digest_without_a_timezone_is_a_warning_naming_utc() {
        let mut d = DigestConfig::default();
        assert_eq!(d.warning(), None, "off: nothing to warn about");
        d.enabled = true;
        let w = d.warning().expect("a warning");
        assert!(w.starts_with("digest.timezone: not set"), "{w}");
        assert!(w.contains("04:10 UTC (12:10 in Asia/Shanghai)"), "{w}");
        d.timezone = Some("UTC".into());
        assert_eq!(d.warning(), None, "UTC written out is a choice");
    }

    #[test]
    fn every_problem_is_reported_at_once() {
        let d = DigestConfig {
            enabled: true,
            at: "25:00".into(),
            timezone: Some("Mars/Olympus".into()),
            summarizer: SummarizerConfig {
                timeout_secs: 0,
                ..SummarizerConfig::default()
            },
            ..DigestConfig::default()
        };
        assert_eq!(
            keys(&d),
            [
                "digest.at",
                "digest.timezone",
                "digest.summarizer.base_url",
                "digest.summarizer.model",
                "digest.summarizer.timeout_secs",
            ]
        );
    }
}
