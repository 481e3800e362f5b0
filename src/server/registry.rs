//! The open connections, so that at the cap one can be closed to make room.
//!
//! The one chosen is the waiting connection (for a head, a body or the next request)
//! nearest to its deadline: the server would close it first anyway, so closing it now
//! only brings that forward. A connection whose request is being handled is never
//! chosen. A client that sends its request at once, as Feishu does, waits for a few
//! milliseconds, so its deadline is among the latest.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex, PoisonError},
};

use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::phase::{Limits, Phase};

/// The connections open now, each with its phase and the means to close it.
#[derive(Debug, Default)]
pub struct Registry {
    conns: Mutex<Conns>,
}

#[derive(Debug, Default)]
struct Conns {
    next_id: u64,
    open: HashMap<u64, Entry>,
}

#[derive(Debug)]
struct Entry {
    phases: watch::Receiver<Phase>,
    evict: CancellationToken,
}

impl Registry {
    /// Adds a connection; it leaves the registry when the registration is dropped.
    pub fn register(self: &Arc<Self>, phases: watch::Receiver<Phase>) -> Registration {
        let evict = CancellationToken::new();
        let mut conns = self.conns.lock().unwrap_or_else(PoisonError::into_inner);
        let id = conns.next_id;
        conns.next_id += 1;
        let entry = Entry {
            phases,
            evict: evict.clone(),
        };
        conns.open.insert(id, entry);
        Registration {
            registry: self.clone(),
            id,
            evict,
        }
    }

    /// Tells the waiting connection nearest to its deadline to close, and returns its
    /// phases, whose channel closes once the connection is gone; `None` when every
    /// connection is busy with a request.
    pub fn evict_one(&self, limits: &Limits) -> Option<watch::Receiver<Phase>> {
        let mut conns = self.conns.lock().unwrap_or_else(PoisonError::into_inner);
        let (_, victim) = conns
            .open
            .iter()
            .filter_map(|(id, e)| Some((e.phases.borrow().deadline(limits)?, *id)))
            .min()?;
        let entry = conns.open.remove(&victim)?;
        entry.evict.cancel();
        Some(entry.phases)
    }
}

/// One connection's place in the [`Registry`].
#[derive(Debug)]
pub struct Registration {
    registry: Arc<Registry>,
    id: u64,
    evict: CancellationToken,
}

impl Registration {
    /// Resolves when the connection is to make room for a new one.
    pub async fn evicted(&self) {
        self.evict.cancelled().await;
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        let mut conns = self
            .registry
            .conns
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        conns.open.remove(&self.id);
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::server::phase::Tracker;

    #[test]
    fn the_waiting_connection_nearest_its_deadline_makes_room() {
        let limits = Limits {
            header_timeout: Duration::from_secs(10),
            body_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(75),
            max_connections: 3,
        };
        let registry = Arc::new(Registry::default());
        // Oldest, but handling a request: never chosen.
        let (busy, rx) = Tracker::accepted();
        busy.request_started(false);
        let busy = registry.register(rx);
        // Idle since before the head below began, yet its deadline is 75 s away.
        let (idle, rx) = Tracker::accepted();
        idle.request_started(false);
        idle.response_done();
        let idle = registry.register(rx);
        let (head, rx) = Tracker::accepted();
        head.bytes_arrived();
        let head = registry.register(rx);

        assert!(registry.evict_one(&limits).is_some());
        assert!(
            head.evict.is_cancelled(),
            "the head has the nearest deadline"
        );
        assert!(!idle.evict.is_cancelled() && !busy.evict.is_cancelled());
        assert!(registry.evict_one(&limits).is_some());
        assert!(idle.evict.is_cancelled());
        assert!(
            registry.evict_one(&limits).is_none(),
            "a busy connection is never closed"
        );
        assert!(!busy.evict.is_cancelled());
        drop(busy);
        assert!(registry.conns.lock().expect("lock").open.is_empty());
    }
}
