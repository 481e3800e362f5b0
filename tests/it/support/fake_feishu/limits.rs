//! Feishu's documented size and frequency limits, and the sliding windows that enforce
//! the frequency limits in real time.
//!
//! Sources (`/work/shared/feishu-protocol.md` §10, §11): `im-v1/message/create.md` (text
//! ≤ 150 KB, card/post ≤ 30 KB; 1000/min and 50/s per app), `im-v1/message-card/patch.md`
//! (5 QPS per message, ≤ 30 KB), `cardkit-v1/card/create.md` (200860 "建议卡片大小控制在
//! 30KB 以内") and "流式更新卡片" (at most 10 operations a second per card entity).

use std::{
    collections::{HashMap, VecDeque},
    time::{Duration, Instant},
};

/// Largest card or post message, card update or CardKit card, in bytes.
pub const CARD_MAX_BYTES: usize = 30 * 1024;
/// Largest text message, in bytes.
pub const TEXT_MAX_BYTES: usize = 150 * 1024;
/// Open API calls an app may make in any one second.
pub const APP_PER_SEC: usize = 50;
/// Open API calls an app may make in any sixty seconds.
pub const APP_PER_MIN: usize = 1000;
/// Card updates (`PATCH /open-apis/im/v1/messages/{id}`) per message in any one second.
pub const PATCH_PER_SEC_PER_MESSAGE: usize = 5;
/// CardKit operations (element content, settings, full update) per card in any one second.
pub const CARDKIT_OPS_PER_SEC_PER_CARD: usize = 10;

const SECOND: Duration = Duration::from_secs(1);
const MINUTE: Duration = Duration::from_secs(60);

/// At most `limit` attempts in any window of length `span`: an attempt at `t` counts for
/// every window `(t', t' + span]` holding `t`, i.e. it stops counting at `t + span`.
///
/// Pure: the caller passes the instants (never going backwards), so it can be tested
/// without sleeping.
///
/// Refused attempts count too. Feishu's documentation says requests over the limit are
/// refused "until the window frees" and does not say whether the refused ones are
/// counted; its gateway counts the requests it receives, so a client that keeps
/// hammering stays refused. A client that waits the `x-ogw-ratelimit-reset` it was given
/// (computed from every counted attempt) gets through.
#[derive(Debug, Clone)]
pub struct SlidingWindow {
    limit: usize,
    span: Duration,
    hits: VecDeque<Instant>,
}

impl SlidingWindow {
    /// A window allowing `limit` attempts per `span`.
    pub fn new(limit: usize, span: Duration) -> Self {
        Self {
            limit,
            span,
            hits: VecDeque::new(),
        }
    }

    /// Records an attempt at `now`. `Ok` when it is within the limit; else `Err(reset)`:
    /// the whole seconds (at least 1) until one more attempt would be accepted.
    pub fn attempt(&mut self, now: Instant) -> Result<(), u64> {
        while self
            .hits
            .front()
            .is_some_and(|first| now.saturating_duration_since(*first) >= self.span)
        {
            self.hits.pop_front();
        }
        self.hits.push_back(now);
        let n = self.hits.len();
        if n <= self.limit {
            return Ok(());
        }
        // One more attempt fits once only `limit - 1` attempts are left in the window,
        // i.e. once the attempt at index `n - limit` has expired.
        let frees_at = self.hits[n - self.limit] + self.span;
        let wait = frees_at.saturating_duration_since(now);
        let secs = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
        Err(secs.max(1))
    }

    /// The attempts that still count at `now`.
    pub fn counted(&self, now: Instant) -> usize {
        self.hits
            .iter()
            .filter(|t| now.saturating_duration_since(**t) < self.span)
            .count()
    }
}

/// Every window the fake keeps.
#[derive(Debug)]
pub(super) struct Limits {
    app_sec: SlidingWindow,
    app_min: SlidingWindow,
    per_message: HashMap<String, SlidingWindow>,
    per_card: HashMap<String, SlidingWindow>,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            app_sec: SlidingWindow::new(APP_PER_SEC, SECOND),
            app_min: SlidingWindow::new(APP_PER_MIN, MINUTE),
            per_message: HashMap::new(),
            per_card: HashMap::new(),
        }
    }
}

impl Limits {
    /// An app-wide attempt: both windows count it. Refused: the violation's name
    /// (`app/min` when the minute window refuses, else `app/s`) and the longer reset.
    pub(super) fn app(&mut self, now: Instant) -> Result<(), (&'static str, u64)> {
        let sec = self.app_sec.attempt(now);
        let min = self.app_min.attempt(now);
        match (sec, min) {
            (Ok(()), Ok(())) => Ok(()),
            (Err(reset), Ok(())) => Err(("app/s", reset)),
            (sec, Err(reset)) => Err(("app/min", reset.max(sec.err().unwrap_or(0)))),
        }
    }

    /// A card update of message `id`.
    pub(super) fn patch(&mut self, id: &str, now: Instant) -> Result<(), u64> {
        self.per_message
            .entry(id.to_string())
            .or_insert_with(|| SlidingWindow::new(PATCH_PER_SEC_PER_MESSAGE, SECOND))
            .attempt(now)
    }

    /// A CardKit operation on card `id`.
    pub(super) fn cardkit(&mut self, id: &str, now: Instant) -> Result<(), u64> {
        self.per_card
            .entry(id.to_string())
            .or_insert_with(|| SlidingWindow::new(CARDKIT_OPS_PER_SEC_PER_CARD, SECOND))
            .attempt(now)
    }
}
