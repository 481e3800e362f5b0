//! What each profile's long connection is doing, for `/status`: its state (connecting,
//! connected, backing off, stopped and why), since when, its last ping and pong, and how
//! often it was made again. Observers (tests, tools) can wait for a change.

use std::{collections::BTreeMap, sync::RwLock};

use tokio::sync::watch;

use crate::util::UnixMs;

crate::util::spelled::spelled! {
    /// Where a long connection stands.
    pub enum ConnState("connection state") {
        /// Fetching an endpoint and dialling it.
        Connecting,
        /// Up: events arrive over it.
        Connected,
        /// Waiting before the next attempt.
        BackingOff,
        /// Not trying any more (a fatal refusal, the reconnect limit, or the shutdown):
        /// `reason` says which.
        Stopped,
    }
}

/// One profile's connection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConnView {
    pub profile: String,
    pub state: ConnState,
    /// When it entered this state.
    pub since: UnixMs,
    /// Why it is backing off or stopped, or, while connecting again, why the attempt
    /// before failed (never a URL or a secret).
    pub reason: Option<String>,
    /// When the next attempt goes, while backing off.
    pub next_attempt_at: Option<UnixMs>,
    /// Last ping sent.
    pub last_ping_at: Option<UnixMs>,
    /// Last pong received.
    pub last_pong_at: Option<UnixMs>,
    /// Connections made again after one ended or failed.
    pub reconnects: u64,
}

impl ConnView {
    /// A connection not yet tried.
    pub fn starting(profile: &str) -> Self {
        Self {
            profile: profile.to_string(),
            state: ConnState::Connecting,
            since: UnixMs::now(),
            reason: None,
            next_attempt_at: None,
            last_ping_at: None,
            last_pong_at: None,
            reconnects: 0,
        }
    }
}

/// Every long connection's view.
#[derive(Debug)]
pub struct Connections {
    views: RwLock<BTreeMap<String, ConnView>>,
    changed: watch::Sender<u64>,
}

impl Default for Connections {
    fn default() -> Self {
        Self {
            views: RwLock::default(),
            changed: watch::channel(0).0,
        }
    }
}

impl Connections {
    /// The views, by profile name.
    pub fn snapshot(&self) -> Vec<ConnView> {
        let views = self.views.read().unwrap_or_else(|p| p.into_inner());
        views.values().cloned().collect()
    }

    /// One profile's view.
    pub fn get(&self, profile: &str) -> Option<ConnView> {
        let views = self.views.read().unwrap_or_else(|p| p.into_inner());
        views.get(profile).cloned()
    }

    /// Changes as they happen (the value counts them).
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.changed.subscribe()
    }

    /// Waits until `done` holds for `profile`'s view; returns it.
    pub async fn wait_for(
        &self,
        profile: &str,
        mut done: impl FnMut(&ConnView) -> bool,
    ) -> ConnView {
        let mut changes = self.subscribe();
        loop {
            if let Some(v) = self.get(profile).filter(|v| done(v)) {
                return v;
            }
            if changes.changed().await.is_err() {
                // The sender lives as long as `self`.
                continue;
            }
        }
    }

    /// Moves `profile` to `state` (with `reason`, and the next attempt's time).
    pub fn set(
        &self,
        profile: &str,
        state: ConnState,
        reason: Option<String>,
        next_attempt_at: Option<UnixMs>,
    ) {
        self.update(profile, |v| {
            if v.state != state {
                v.since = UnixMs::now();
            }
            v.state = state;
            v.reason = reason;
            v.next_attempt_at = next_attempt_at;
        });
    }

    /// A ping went out.
    pub fn pinged(&self, profile: &str) {
        self.update(profile, |v| v.last_ping_at = Some(UnixMs::now()));
    }

    /// A pong came in.
    pub fn ponged(&self, profile: &str) {
        self.update(profile, |v| v.last_pong_at = Some(UnixMs::now()));
    }

    /// A connection is being made again.
    pub fn reconnecting(&self, profile: &str) {
        self.update(profile, |v| v.reconnects += 1);
    }

    fn update(&self, profile: &str, change: impl FnOnce(&mut ConnView)) {
        {
            let mut views = self.views.write().unwrap_or_else(|p| p.into_inner());
            let view = views
                .entry(profile.to_string())
                .or_insert_with(|| ConnView::starting(profile));
            change(view);
        }
        self.changed.send_modify(|n| *n += 1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_change_wakes_who_waits_for_it() {
        let c = std::sync::Arc::new(Connections::default());
        let waiter = {
            let c = c.clone();
            tokio::spawn(async move { c.wait_for("p", |v| v.state == ConnState::Stopped).await })
        };
        c.set("p", ConnState::Connecting, None, None);
        c.set("p", ConnState::Stopped, Some("refused".into()), None);
        let v = waiter.await.expect("waiter");
        assert_eq!(
            (v.state, v.reason.as_deref()),
            (ConnState::Stopped, Some("refused"))
        );
        c.reconnecting("p");
        assert_eq!(c.get("p").map(|v| v.reconnects), Some(1));
    }
}
