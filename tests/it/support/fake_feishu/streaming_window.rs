//! CardKit's streaming window. A card's streaming mode closes by itself ten minutes
//! after it was turned on ("流式更新卡片"; `card-element/content.md`: 200850 "Card
//! streaming timeout" — "卡片流式更新模式因超时自动关闭", to be turned on again with the
//! settings call). Text streamed into the card after that is refused with HTTP 400 /
//! 200850 until streaming is turned on again, which starts a new window. A full update
//! (`PUT …/cards/{card_id}`) and the settings call are not refused for it (their docs do
//! not list 200850).
//!
//! The window is measured on the fake's own clock: the real one plus what a test moved
//! it forward by ([`FakeState::advance_clock`]), so no test waits ten minutes, or sleeps.

use std::time::{Duration, Instant};

use super::{FakeState, entities::CardEntity};

/// How long streaming stays on after it was turned on, unless a test says otherwise.
pub const STREAMING_WINDOW: Duration = Duration::from_secs(600);

impl FakeState {
    /// Makes every card's streaming window `window` long.
    pub fn set_streaming_window(&self, window: Duration) {
        *self.streaming_window.lock().expect("lock") = window;
    }

    /// Moves the fake's clock forward by `by`.
    pub fn advance_clock(&self, by: Duration) {
        *self.clock_ahead.lock().expect("lock") += by;
        self.activity
            .send(format!("clock:+{}ms", by.as_millis()))
            .ok();
    }

    /// Now, on the fake's clock.
    pub(super) fn now(&self) -> Instant {
        Instant::now() + *self.clock_ahead.lock().expect("lock")
    }

    /// Whether `entity`'s streaming mode has timed out: it is on, and was turned on
    /// longer ago than the window.
    pub(super) fn streaming_timed_out(&self, entity: &CardEntity) -> bool {
        let window = *self.streaming_window.lock().expect("lock");
        let on = entity.card["config"]["streaming_mode"] == true;
        on && entity
            .streaming_since
            .is_some_and(|since| self.now().saturating_duration_since(since) >= window)
    }

    /// Records that `entity`'s streaming mode may have changed: turned on (again) now,
    /// or off.
    pub(super) fn streaming_changed(&self, entity: &mut CardEntity, was_on: bool) {
        let on = entity.card["config"]["streaming_mode"] == true;
        entity.streaming_since = match (was_on, on) {
            (_, false) => None,
            (false, true) => Some(self.now()),
            (true, true) => entity.streaming_since,
        };
    }
}
