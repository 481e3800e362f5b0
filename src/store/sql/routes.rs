//! A run of routed messages written inside one transaction, with one multi-row
//! statement per table where the writes do not depend on each other — verdicts,
//! event-log records, their items, display names — then each message's session, turn
//! and feed item in order. The same outcome as routing the messages one by one: the
//! first verdict and record of a message stand, the last name learned wins.

use std::collections::{HashMap, HashSet};

use super::{
    dialect::Dialect,
    feed,
    rungs::{Texts, rungs},
    store::Write,
    writes::{insert_events, insert_turn, insert_verdicts, upsert_names, upsert_session_within},
};
use crate::{
    store::{BatchStep, NewFeedItem, NewVerdict, RouteWrite, Routed, StoreError},
    util::UnixMs,
    vocab::NewContextEvent,
};

/// Records a run of routed messages and lone verdicts (no recall among them) inside the
/// open transaction `tx` (see the module header); one entry per step (`None` for a lone
/// verdict).
pub(crate) async fn routes_within<DB: Dialect>(
    tx: &mut Write<'_, DB>,
    steps: &[BatchStep],
) -> Result<Vec<Option<Routed>>, StoreError> {
    let verdicts: Vec<&NewVerdict> = steps
        .iter()
        .filter_map(|s| match s {
            BatchStep::Route(w) => Some(&w.verdict),
            BatchStep::Verdict(v) => Some(v),
            BatchStep::Recall { .. } => None,
        })
        .collect();
    let mut fresh = insert_verdicts_within(tx, &verdicts).await?;
    let events: Vec<&NewContextEvent> = route_writes(steps).flat_map(|w| &w.events).collect();
    insert_events(tx, &events).await?;
    upsert_names_within(tx, &last_names(steps)).await?;

    // Sessions and turns, message by message.
    let mut out: Vec<Option<Routed>> = Vec::with_capacity(steps.len());
    for step in steps {
        let BatchStep::Route(w) = step else {
            out.push(None);
            continue;
        };
        let fresh = fresh.remove(&(w.verdict.profile.clone(), w.verdict.message_id.clone()));
        let session = match &w.session {
            Some(s) => Some(upsert_session_within(tx, s).await?),
            None => None,
        };
        if let Some(t) = w.turn.as_ref().filter(|_| fresh) {
            insert_turn(tx, t).await?;
        }
        if let Some(f) = &w.feed {
            gather_within(tx, f).await?;
        }
        out.push(Some(Routed { session, fresh }));
    }
    Ok(out)
}

/// The routed messages among `steps`.
fn route_writes(steps: &[BatchStep]) -> impl Iterator<Item = &RouteWrite> {
    steps.iter().filter_map(|s| match s {
        BatchStep::Route(w) => Some(&**w),
        _ => None,
    })
}

/// Inserts verdicts; the `(profile, message_id)` of those that went in, which are fresh
/// (the first of a message only).
async fn insert_verdicts_within<DB: Dialect>(
    tx: &mut Write<'_, DB>,
    verdicts: &[&NewVerdict],
) -> Result<HashSet<(String, String)>, StoreError> {
    let mut fresh = HashSet::new();
    for chunk in rungs(verdicts) {
        static TEXTS: Texts = Texts::new(insert_verdicts);
        let q = TEXTS.get(chunk.len(), DB::NUMBERED);
        let mut query = sqlx::query_as::<_, (String, String)>(&q);
        for v in chunk {
            query = query
                .bind(&v.profile)
                .bind(&v.message_id)
                .bind(&v.chat_id)
                .bind(v.verdict.to_string())
                .bind(v.reason.to_string())
                .bind(&v.session_key)
                .bind(v.created_at);
        }
        fresh.extend(query.fetch_all(&mut **tx).await?);
    }
    Ok(fresh)
}

/// A display name to remember: profile, open id, name, when learned.
type NameRow<'a> = (&'a str, &'a str, &'a str, UnixMs);

/// The display names the routed messages learned, the last one per (profile, open id),
/// in key order: two batches (of two replicas) that both name a person lock the same
/// rows in the same order, so they wait for each other instead of deadlocking (which
/// costs a second of Postgres's deadlock_timeout and the batch a retry).
fn last_names(steps: &[BatchStep]) -> Vec<NameRow<'_>> {
    let mut names: Vec<NameRow<'_>> = Vec::new();
    let mut at: HashMap<(&str, &str), usize> = HashMap::new();
    for w in route_writes(steps) {
        for (open_id, name) in &w.names {
            let row = (
                w.verdict.profile.as_str(),
                open_id.as_str(),
                name.as_str(),
                w.verdict.created_at,
            );
            match at.get(&(row.0, row.1)) {
                Some(&i) => names[i] = row,
                None => {
                    at.insert((row.0, row.1), names.len());
                    names.push(row);
                }
            }
        }
    }
    names.sort_unstable_by(|a, b| (a.0, a.1).cmp(&(b.0, b.1)));
    names
}

/// Remembers display names (each `(profile, open_id)` at most once).
async fn upsert_names_within<DB: Dialect>(
    tx: &mut Write<'_, DB>,
    names: &[NameRow<'_>],
) -> Result<(), StoreError> {
    for chunk in rungs(names) {
        static TEXTS: Texts = Texts::new(upsert_names);
        let q = TEXTS.get(chunk.len(), DB::NUMBERED);
        let mut query = sqlx::query(&q);
        for (profile, open_id, name, at) in chunk {
            query = query.bind(*profile).bind(*open_id).bind(*name).bind(*at);
        }
        query.execute(&mut **tx).await?;
    }
    Ok(())
}

/// Gathers a message for its session's batched feed.
async fn gather_within<DB: Dialect>(
    tx: &mut Write<'_, DB>,
    f: &NewFeedItem,
) -> Result<(), StoreError> {
    sqlx::query(feed::INSERT_ITEM)
        .bind(&f.profile)
        .bind(&f.session_key)
        .bind(&f.chat_id)
        .bind(&f.message_id)
        .bind(&f.sender)
        .bind(&f.text)
        .bind(f.said_at)
        .bind(f.gathered_at)
        .execute(&mut **tx)
        .await?;
    Ok(())
}
