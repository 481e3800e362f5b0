//! SQLite's inbox claims, held in the serving process's memory instead of written.
//!
//! One process owns a SQLite file, and at start it takes back every claim an earlier run
//! left, so a claim written to the file served only that process, and cost the drain a
//! rewrite of every claimed row (its 1.5 KB payload with it) and of two index entries.
//! Here a claimed row stays `pending` in the file while the process holds it, with the
//! owner and lease a written claim would carry; recording its outcome writes the row once,
//! counting the attempt then. The attempts a written claim counts at once are written
//! only where they would be seen: when a lease runs out (the holder died) and when the
//! claims are taken back at start.

use std::{
    collections::{HashMap, HashSet},
    sync::Mutex,
};

use crate::{store::InboxEvent, util::UnixMs};

/// The claims held, and the lock that makes claims take turns.
#[derive(Debug, Default)]
pub struct HeldClaims {
    held: Mutex<HashMap<i64, Held>>,
    /// Held while a claim reads and takes rows: claimers never get the same row.
    pub(crate) claiming: tokio::sync::Mutex<()>,
}

#[derive(Debug)]
struct Held {
    owner: String,
    until: UnixMs,
    chat: String,
    /// Counted an attempt before this claim (a retry), as `/status` tells them apart.
    retried: bool,
}

/// What the held claims add to the file's counts.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct HeldCounts {
    pub(crate) held: i64,
    pub(crate) retried: i64,
}

impl HeldClaims {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<i64, Held>> {
        self.held.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Lets go of the claims whose lease ran out before `now`: their ids.
    pub(crate) fn expire(&self, now: UnixMs) -> Vec<i64> {
        let mut held = self.lock();
        let gone: Vec<i64> = held
            .iter()
            .filter(|(_, h)| h.until < now)
            .map(|(id, _)| *id)
            .collect();
        for id in &gone {
            held.remove(id);
        }
        gone
    }

    /// The chats with an event in hand.
    pub(crate) fn chats(&self) -> HashSet<String> {
        self.lock().values().map(|h| h.chat.clone()).collect()
    }

    /// Takes `events` (read `pending`) for `owner` until `until`: they answer as claimed,
    /// their attempt counted.
    pub(crate) fn hold(&self, owner: &str, until: UnixMs, events: &mut [InboxEvent]) {
        let mut held = self.lock();
        for e in events {
            held.insert(
                e.id,
                Held {
                    owner: owner.to_owned(),
                    until,
                    chat: e.event.chat_key.clone(),
                    retried: e.attempts > 0,
                },
            );
            e.event.status = crate::store::InboxStatus::Processing;
            e.attempts += 1;
        }
    }

    /// Extends `owner`'s leases among `ids` to `until`.
    pub(crate) fn renew(&self, owner: &str, ids: &[i64], until: UnixMs) {
        let mut held = self.lock();
        for id in ids {
            if let Some(h) = held.get_mut(id).filter(|h| h.owner == owner) {
                h.until = until;
            }
        }
    }

    /// Lets go of `ids` (their outcome is recorded, or they are given back).
    pub(crate) fn release(&self, ids: &[i64]) {
        let mut held = self.lock();
        for id in ids {
            held.remove(id);
        }
    }

    /// Lets go of every claim: their ids.
    pub(crate) fn take_all(&self) -> Vec<i64> {
        self.lock().drain().map(|(id, _)| id).collect()
    }

    /// Whether `id` is held.
    pub(crate) fn holds(&self, id: i64) -> bool {
        self.lock().contains_key(&id)
    }

    /// How many are held, and of those how many are retries.
    pub(crate) fn counts(&self) -> HeldCounts {
        let held = self.lock();
        HeldCounts {
            held: i64::try_from(held.len()).unwrap_or(i64::MAX),
            retried: i64::try_from(held.values().filter(|h| h.retried).count()).unwrap_or(i64::MAX),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{InboxStatus, NewInboxEvent};

    fn pending(id: i64, chat: &str, attempts: i64) -> InboxEvent {
        InboxEvent {
            id,
            event: NewInboxEvent {
                profile: "p".into(),
                event_id: format!("e{id}"),
                event_type: "t".into(),
                message_id: None,
                chat_key: chat.into(),
                payload: "{}".into(),
                received_at: UnixMs(0),
                status: InboxStatus::Pending,
            },
            attempts,
            last_error: None,
            next_attempt_at: UnixMs(0),
        }
    }

    #[test]
    fn claims_are_held_renewed_by_their_owner_and_let_go() {
        let claims = HeldClaims::default();
        let mut mine = [pending(1, "oc_a", 0), pending(2, "oc_a", 1)];
        claims.hold("me", UnixMs(1_000), &mut mine);
        assert_eq!(
            mine.iter()
                .map(|e| (e.event.status, e.attempts))
                .collect::<Vec<_>>(),
            [(InboxStatus::Processing, 1), (InboxStatus::Processing, 2)]
        );
        let mut theirs = [pending(3, "oc_b", 0)];
        claims.hold("them", UnixMs(1_000), &mut theirs);
        assert_eq!(
            claims.counts(),
            HeldCounts {
                held: 3,
                retried: 1
            }
        );
        assert_eq!(
            claims.chats(),
            HashSet::from(["oc_a".to_owned(), "oc_b".to_owned()])
        );

        claims.renew("me", &[1, 2, 3], UnixMs(5_000));
        assert_eq!(claims.expire(UnixMs(1_000)), Vec::<i64>::new(), "not yet");
        assert_eq!(claims.expire(UnixMs(2_000)), [3], "only theirs ran out");
        assert!(claims.holds(1) && !claims.holds(3));

        claims.release(&[1]);
        assert_eq!(claims.take_all(), [2]);
        assert_eq!(claims.counts(), HeldCounts::default());
    }
}
