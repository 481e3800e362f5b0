//! What the outbound remembers a while about places it sent to: chats that refuse
//! replies in thread, messages that are gone, apps that may not use CardKit. Bounded:
//! entries expire, and a full memory forgets its oldest half.

use std::{collections::HashMap, sync::Mutex, time::Duration};

use tokio::time::Instant;

/// Keys remembered for `ttl`, each with the code that taught it.
#[derive(Debug)]
pub(super) struct Memory {
    ttl: Duration,
    cap: usize,
    seen: Mutex<HashMap<String, (Instant, i64)>>,
}

impl Memory {
    /// A memory of at most `cap` keys, each kept for `ttl`.
    pub(super) fn new(ttl: Duration, cap: usize) -> Self {
        Self {
            ttl,
            cap,
            seen: Mutex::default(),
        }
    }

    /// Remembers `key` (with `code`) from now on.
    pub(super) fn insert(&self, key: &str, code: i64) {
        let mut seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
        let now = Instant::now();
        if seen.len() >= self.cap {
            seen.retain(|_, (at, _)| now.duration_since(*at) < self.ttl);
        }
        if seen.len() >= self.cap {
            let mut ages: Vec<Instant> = seen.values().map(|(at, _)| *at).collect();
            ages.sort();
            let cut = ages[ages.len() / 2];
            seen.retain(|_, (at, _)| *at > cut);
        }
        seen.insert(key.to_string(), (now, code));
    }

    /// The code `key` was remembered with, while it is remembered.
    pub(super) fn get(&self, key: &str) -> Option<i64> {
        let mut seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
        match seen.get(key) {
            Some((at, code)) if at.elapsed() < self.ttl => Some(*code),
            Some(_) => {
                seen.remove(key);
                None
            }
            None => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_memory_forgets_its_oldest_and_keeps_the_newest() {
        let m = Memory::new(Duration::from_secs(3600), 4);
        for k in ["a", "b", "c", "d", "e"] {
            m.insert(k, 1);
        }
        assert_eq!(m.get("e"), Some(1));
        assert!(m.seen.lock().expect("lock").len() <= 4);
    }

    #[test]
    fn an_entry_expires() {
        let m = Memory::new(Duration::ZERO, 4);
        m.insert("a", 7);
        assert_eq!(m.get("a"), None);
    }
}
