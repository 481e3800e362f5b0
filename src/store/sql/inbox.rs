//! SQL of the [`crate::store::InboxStore`]: the group-committed insert, claims with
//! owners and leases, outcomes. SQLite accepts the same `$n` placeholders as Postgres,
//! so only what differs (the claim's locking) comes from the [`Dialect`].

use async_trait::async_trait;
use sqlx::query::QueryAs;

use super::{
    dialect::Dialect,
    inbox_depth::{DEPTH, DepthRow, depth_of},
    rungs::{Texts, padded, rungs},
    store::{SqlStore, Write},
    writes::values,
};
use crate::{
    store::{
        Backend, ClaimLimits, Finish, InboxDepth, InboxEvent, InboxProblem, InboxStatus,
        InboxStore, InsertOutcome, NewInboxEvent, StoreError, held_claims::HeldClaims,
    },
    util::UnixMs,
};

/// One multi-row `INSERT` for a whole group-commit batch: a statement per event would
/// cost a round trip (and, on SQLite, a hand-off to its thread) per row. Rows that hit a
/// unique index — an event id or message id already stored, or repeated earlier in the
/// same batch — are skipped, and `RETURNING` names the ones that went in. Nine
/// placeholders per row, bound by [`bind_new_event`] (`numbered` as in
/// [`Dialect::NUMBERED`]).
pub(crate) fn insert_inbox(rows: usize, numbered: bool) -> String {
    format!(
        "INSERT INTO inbox_events \
         (profile, event_id, event_type, message_id, chat_key, payload, received_at, status, \
         next_attempt_at) VALUES {} ON CONFLICT DO NOTHING RETURNING profile, event_id",
        values(rows, 9, numbered)
    )
}

/// Matches the `RETURNING` rows back to the batch: the first occurrence of a returned
/// (profile, event id) was inserted; everything else was a duplicate.
fn outcomes(events: &[NewInboxEvent], inserted: Vec<(String, String)>) -> Vec<InsertOutcome> {
    let mut inserted: std::collections::HashSet<(String, String)> = inserted.into_iter().collect();
    events
        .iter()
        .map(|e| {
            if inserted.remove(&(e.profile.clone(), e.event_id.clone())) {
                InsertOutcome::Inserted
            } else {
                InsertOutcome::Duplicate
            }
        })
        .collect()
}

/// Columns of an [`InboxEvent`], for `SELECT` and `RETURNING`.
const INBOX_COLUMNS: &str = "id, profile, event_id, event_type, message_id, chat_key, payload, \
     received_at, status, attempts, last_error, next_attempt_at";

/// Claims whose lease ran out (their worker died) become pending again, keeping the
/// attempt they counted.
const EXPIRE: &str = "UPDATE inbox_events \
     SET status = 'pending', lease_until = NULL, lease_owner = NULL \
     WHERE status = 'processing' AND lease_until < $1";

/// The chats with due work that no worker holds, in key order: `$1` now, `$2` how many
/// chats to look at, `$3` how many to answer, and with `after`, `$4` the key to start
/// after. The chats with pending rows are found by skipping through the lane index (one
/// seek per chat, however long a chat's backlog); a chat with a row in hand is left
/// alone, so each chat's events go through one worker at a time, in arrival order.
/// Claims go round the chats (the worker starts after the last chat it took), so every
/// chat with due work is served in turn, however old the others' backlogs.
///
/// The scan yields chats in key order, and the limit is taken before the ordering, which
/// only sorts what was found: Postgres stops at the first `$3` free chats. (SQLite's
/// planner may move the ordering inside the limit; either way the answer is the `$3`
/// free chats with the lowest keys.) With the limit after the `ORDER BY`, every claim on
/// Postgres looked at all `$2` chats, each look stepping over the index entries the
/// chat's last batch left dead (claimed, then done) — at half a 100,000-event drain in
/// 16 chats, 7,186 heap fetches and 36 ms for one claim.
pub fn lanes(after: bool) -> String {
    let first = if after { " AND chat_key > $4" } else { "" };
    format!(
        "\
WITH RECURSIVE lanes (chat_key, n) AS (
    SELECT MIN(chat_key), CAST(1 AS BIGINT) FROM inbox_events WHERE status = 'pending'{first}
  UNION ALL
    SELECT (SELECT MIN(e.chat_key) FROM inbox_events e
            WHERE e.status = 'pending' AND e.chat_key > lanes.chat_key), n + 1
    FROM lanes WHERE lanes.chat_key IS NOT NULL AND n < $2
)
SELECT chat_key FROM (
    SELECT l.chat_key FROM lanes l
    WHERE l.chat_key IS NOT NULL
      AND EXISTS (SELECT 1 FROM inbox_events h
                  WHERE h.status = 'pending' AND h.chat_key = l.chat_key
                    AND +h.next_attempt_at <= $1)
      AND NOT EXISTS (SELECT 1 FROM inbox_events p
                      WHERE p.status = 'processing' AND p.chat_key = l.chat_key)
    LIMIT $3
) free
ORDER BY chat_key"
    )
}

/// How many chats a claim looks at: beyond that, chats wait until earlier ones drain.
const LANE_SCAN: i64 = 1024;

/// Claims a chat's oldest due rows: `$1` now, `$2` lease, `$3` how many, `$4` owner,
/// `$5` the chat; `lock` is the backend's row lock.
///
/// The unary `+` on `next_attempt_at` (here and in [`lanes`]) keeps SQLite's planner off
/// the due index: without statistics it would take `(status, next_attempt_at)`, read
/// every pending row of every chat to find this chat's, and sort them — a claim costing
/// the whole backlog. Through the lane index it reads the chat's rows in id order and
/// stops at the limit. (Postgres plans from its statistics; the `+` is a no-op there.)
fn claim_lane(lock: &str) -> String {
    format!(
        "UPDATE inbox_events SET status = 'processing', lease_until = $1 + $2, \
         lease_owner = $4, attempts = attempts + 1 \
         WHERE id IN (SELECT id FROM inbox_events \
                      WHERE status = 'pending' AND chat_key = $5 AND +next_attempt_at <= $1 \
                      ORDER BY id LIMIT $3 {lock}) \
         RETURNING {INBOX_COLUMNS}"
    )
}

/// Whether any claim is written (left by a version that wrote its claims).
const WRITTEN_CLAIMS: &str =
    "SELECT EXISTS (SELECT 1 FROM inbox_events WHERE status = 'processing')";

/// A chat's oldest due rows, read for a claim held in memory (see `held_claims`): `$1`
/// the chat, `$2` now, `$3` how many. The `+` as in [`claim_lane`].
fn pending_lane() -> String {
    format!(
        "SELECT {INBOX_COLUMNS} FROM inbox_events \
         WHERE status = 'pending' AND chat_key = $1 AND +next_attempt_at <= $2 \
         ORDER BY id LIMIT $3"
    )
}

/// The attempt of held claims let go without an outcome (a lease that ran out, a claim
/// taken back at start), counted as a written claim counts it; with `due`, `$1` makes
/// them due at once. One placeholder per id after.
fn count_attempts(ids: usize, due: bool) -> String {
    let (set, first) = if due {
        (", next_attempt_at = $1", 2)
    } else {
        ("", 1)
    };
    format!(
        "UPDATE inbox_events SET attempts = attempts + 1{set}{} AND status = 'pending'",
        ids_from(first, ids)
    )
}

/// How an attempt ended, for the rows listed after `$1` (error) and `$2` (time): what
/// `SET` writes besides the attempt count (see [`attempt_count`]). A deferral writes
/// what a retry does.
const FINISH_DONE: &str =
    "status = 'done', last_error = $1, processed_at = $2, lease_until = NULL, lease_owner = NULL";
const FINISH_RETRY: &str = "status = 'pending', last_error = $1, next_attempt_at = $2, \
     lease_until = NULL, lease_owner = NULL";
const FINISH_FAILED: &str = "status = 'failed', last_error = $1, processed_at = $2, \
     lease_until = NULL, lease_owner = NULL";

/// How an outcome changes the attempt count, as the start of a `SET` list. A claim in
/// writing (`processing`) counted its attempt when it was made, and a deferral (the
/// database failed, not the event) takes it back. Where claims are `held` in memory, a
/// claimed row is still `pending`, its attempt not yet counted: an outcome counts it and
/// a deferral leaves the count as it is (a row claimed in writing by an earlier version
/// is counted as above).
fn attempt_count(finish: &Finish, held: bool) -> &'static str {
    match (held, finish) {
        (false, Finish::Deferred { .. }) => "attempts = attempts - 1, ",
        (false, _) => "",
        (true, Finish::Deferred { .. }) => {
            "attempts = attempts - (CASE WHEN status = 'processing' THEN 1 ELSE 0 END), "
        }
        (true, _) => "attempts = attempts + (CASE WHEN status = 'pending' THEN 1 ELSE 0 END), ",
    }
}

/// Rows per statement that lists ids (well under either backend's parameter limit).
pub(crate) const IDS_PER_STATEMENT: usize = 1000;

/// `WHERE id IN (...)` with `n` placeholders from `$first` on.
fn ids_from(first: usize, n: usize) -> String {
    let list = (0..n)
        .map(|i| format!("${}", first + i))
        .collect::<Vec<_>>()
        .join(", ");
    format!(" WHERE id IN ({list})")
}

/// Returned to pending without counting the attempt (shutdown), for the listed rows.
fn release(ids: usize) -> String {
    format!(
        "UPDATE inbox_events \
         SET status = 'pending', attempts = attempts - 1, lease_until = NULL, lease_owner = NULL{} \
         AND status = 'processing'",
        ids_from(1, ids)
    )
}

/// An earlier run's claims become due at once: `$2` names the owner, `$3` takes every
/// claim whatever its owner (SQLite, where one process owns the file).
const RECLAIM: &str = "UPDATE inbox_events \
     SET status = 'pending', lease_until = NULL, lease_owner = NULL, next_attempt_at = $1 \
     WHERE status = 'processing' AND (lease_owner = $2 OR $3)";

/// The heartbeat: `$1` the new lease end, `$2` the owner, then one placeholder per id.
fn renew(ids: usize) -> String {
    let list = (0..ids)
        .map(|i| format!("${}", i + 3))
        .collect::<Vec<_>>()
        .join(", ");
    format!(
        "UPDATE inbox_events SET lease_until = $1 \
         WHERE status = 'processing' AND lease_owner = $2 AND id IN ({list})"
    )
}

/// On Postgres through the partial index of failed rows and retries
/// (`inbox_events_problems`, whose condition this `WHERE` repeats word for word so that
/// the planner sees it applies); on SQLite through the status index.
const PROBLEMS: &str = "SELECT id, profile, event_id, event_type, status, attempts, last_error \
     FROM inbox_events WHERE status = 'failed' OR (status = 'pending' AND attempts > 0) \
     ORDER BY id DESC LIMIT $1";

fn select_inbox_by_key() -> String {
    format!("SELECT {INBOX_COLUMNS} FROM inbox_events WHERE profile = $1 AND event_id = $2")
}

/// Rows claimed together come back from `RETURNING` in no particular order.
fn in_arrival_order(mut events: Vec<InboxEvent>) -> Vec<InboxEvent> {
    events.sort_by_key(|e| e.id);
    events
}

/// The statement for `ids` rows and its `$1` (error) and `$2` (time) arguments for one
/// [`Finish`]; `held` when claims are held in memory (see [`attempt_count`]).
fn finish_statement(
    finish: &Finish,
    now: UnixMs,
    ids: usize,
    held: bool,
) -> (String, Option<&str>, UnixMs) {
    let (set, error, at) = match finish {
        Finish::Done => (FINISH_DONE, None, now),
        Finish::Retry { error, at } => (FINISH_RETRY, Some(error.as_str()), *at),
        Finish::Deferred { error, at } => (FINISH_RETRY, Some(error.as_str()), *at),
        Finish::Failed { error } => (FINISH_FAILED, Some(error.as_str()), now),
    };
    let q = format!(
        "UPDATE inbox_events SET {}{set}{}",
        attempt_count(finish, held),
        ids_from(3, ids)
    );
    (q, error, at)
}

/// Records `finish` for `ids` inside the open transaction `tx`, in statements of the
/// few lengths of [`rungs`]; `held` when claims are held in memory (see
/// [`attempt_count`]).
pub(crate) async fn finish_within<DB: Dialect>(
    tx: &mut Write<'_, DB>,
    ids: &[i64],
    finish: &Finish,
    now: UnixMs,
    held: bool,
) -> Result<(), StoreError> {
    for chunk in rungs(ids) {
        let (q, error, at) = finish_statement(finish, now, chunk.len(), held);
        let mut query = sqlx::query(&q).bind(error).bind(at);
        for id in chunk {
            query = query.bind(id);
        }
        query.execute(&mut **tx).await?;
    }
    Ok(())
}

/// A statement that answers `(profile, event_id)` rows.
pub(crate) type KeysQuery<'q, DB> =
    QueryAs<'q, DB, (String, String), <DB as sqlx::Database>::Arguments<'q>>;

/// Binds one [`NewInboxEvent`] to its nine placeholders of [`insert_inbox`] (a new row
/// is due when it arrives).
pub(crate) fn bind_new_event<'q, DB: Dialect>(
    query: KeysQuery<'q, DB>,
    e: &'q NewInboxEvent,
) -> KeysQuery<'q, DB> {
    query
        .bind(&e.profile)
        .bind(&e.event_id)
        .bind(&e.event_type)
        .bind(&e.message_id)
        .bind(&e.chat_key)
        .bind(&e.payload)
        .bind(e.received_at)
        .bind(e.status.as_str())
        .bind(e.received_at)
}

#[async_trait]
impl<DB: Dialect> InboxStore for SqlStore<DB> {
    async fn insert_inbox_batch(
        &self,
        events: &[NewInboxEvent],
    ) -> Result<Vec<InsertOutcome>, StoreError> {
        if events.is_empty() {
            return Ok(Vec::new());
        }
        // One statement (its success is its commit), in one of a few lengths so that
        // the connection prepares it once: the repeats of the last event that pad it
        // change nothing — `ON CONFLICT DO NOTHING` skips each (its key went in a row
        // before, or was there already), `RETURNING` names only rows that went in, and
        // [`outcomes`] reads the first occurrence of a key.
        let rows = padded(events);
        static TEXTS: Texts = Texts::new(insert_inbox);
        let q = TEXTS.get(rows.len(), DB::NUMBERED);
        self.bounded(async {
            let inserted = self.write_inbox(&q, &rows).await?;
            Ok(outcomes(events, inserted))
        })
        .await
    }

    async fn claim_inbox(
        &self,
        owner: &str,
        now: UnixMs,
        lease_ms: i64,
        limits: ClaimLimits,
        after_chat: Option<&str>,
    ) -> Result<Vec<InboxEvent>, StoreError> {
        if let Some(held) = DB::held_claims(&self.state) {
            let claim = HeldClaim {
                owner,
                now,
                lease_ms,
                limits,
                after_chat,
            };
            return self.claim_held(held, claim).await;
        }
        let claim = claim_lane(DB::CLAIM_LOCK);
        let rows = self
            .bounded(async {
                let mut tx = self.transaction().await?;
                for statement in DB::CLAIM_SERIALIZE {
                    sqlx::query(statement).execute(&mut *tx).await?;
                }
                sqlx::query(EXPIRE).bind(now).execute(&mut *tx).await?;
                let lanes = free_lanes::<DB>(&mut tx, now, limits, after_chat).await?;
                let mut rows: Vec<InboxEvent> = Vec::new();
                for chat in &lanes {
                    let claimed: Vec<InboxEvent> = sqlx::query_as(&claim)
                        .bind(now)
                        .bind(lease_ms)
                        .bind(limits.per_chat)
                        .bind(owner)
                        .bind(chat)
                        .fetch_all(&mut *tx)
                        .await?;
                    rows.extend(claimed);
                }
                tx.commit().await?;
                Ok(rows)
            })
            .await?;
        Ok(in_arrival_order(rows))
    }

    async fn renew_leases(
        &self,
        owner: &str,
        ids: &[i64],
        until: UnixMs,
    ) -> Result<(), StoreError> {
        if let Some(held) = DB::held_claims(&self.state) {
            held.renew(owner, ids, until);
            return Ok(());
        }
        if ids.is_empty() {
            return Ok(());
        }
        let q = renew(ids.len());
        let mut query = sqlx::query(&q).persistent(false).bind(until).bind(owner);
        for id in ids {
            query = query.bind(id);
        }
        self.execute(query).await.map(drop)
    }

    async fn reclaim_inbox(&self, owner: &str, now: UnixMs) -> Result<u64, StoreError> {
        let every_claim = DB::BACKEND == Backend::Sqlite;
        let Some(held) = DB::held_claims(&self.state) else {
            let query = sqlx::query(RECLAIM).bind(now).bind(owner).bind(every_claim);
            return self.execute(query).await;
        };
        // Every claim held, and any written by a version that wrote its claims.
        let ids = held.take_all();
        self.bounded(async {
            let mut tx = self.transaction().await?;
            let written = sqlx::query(RECLAIM)
                .bind(now)
                .bind(owner)
                .bind(every_claim)
                .execute(&mut *tx)
                .await?;
            let counted = count_attempts_within(&mut tx, &ids, Some(now)).await?;
            tx.commit().await?;
            Ok(DB::rows_affected(&written) + counted)
        })
        .await
    }

    async fn finish_inbox(
        &self,
        ids: &[i64],
        finish: &Finish,
        now: UnixMs,
    ) -> Result<(), StoreError> {
        if ids.is_empty() {
            return Ok(());
        }
        self.bounded(async {
            let mut tx = self.transaction().await?;
            finish_within(&mut tx, ids, finish, now, self.holds_claims()).await?;
            tx.commit().await
        })
        .await?;
        self.let_go(ids);
        Ok(())
    }

    async fn release_inbox(&self, ids: &[i64]) -> Result<(), StoreError> {
        if ids.is_empty() {
            return Ok(());
        }
        // A held claim is given back by letting go; a written one by the statement.
        self.let_go(ids);
        self.bounded(async {
            let mut tx = self.transaction().await?;
            for chunk in ids.chunks(IDS_PER_STATEMENT) {
                let q = release(chunk.len());
                let mut query = sqlx::query(&q).persistent(false);
                for id in chunk {
                    query = query.bind(id);
                }
                query.execute(&mut *tx).await?;
            }
            tx.commit().await
        })
        .await
    }

    async fn inbox_depth(&self) -> Result<InboxDepth, StoreError> {
        let rows: Vec<DepthRow> = self
            .fetch(sqlx::query_as(DEPTH).fetch_all(&self.pool))
            .await?;
        let mut depth = depth_of(rows);
        if let Some(held) = DB::held_claims(&self.state) {
            // Held rows are pending in the file; one finished meanwhile is counted once.
            let counts = &mut depth.counts;
            let h = held.counts();
            let held_pending = h.held.min(counts.pending);
            counts.pending -= held_pending;
            counts.processing += held_pending;
            counts.retrying -= h.retried.min(counts.retrying);
        }
        Ok(depth)
    }

    async fn inbox_problems(&self, limit: i64) -> Result<Vec<InboxProblem>, StoreError> {
        let held = DB::held_claims(&self.state);
        // A held retry is in hand, not waiting: left out, as a written claim would be.
        let more = held.map_or(0, |h| h.counts().retried);
        let query = sqlx::query_as(PROBLEMS).bind(limit.saturating_add(more));
        let rows: Vec<ProblemRow> = self.fetch(query.fetch_all(&self.pool)).await?;
        let waiting = |r: &ProblemRow| {
            !(r.problem.status == InboxStatus::Pending && held.is_some_and(|h| h.holds(r.id)))
        };
        let limit = usize::try_from(limit).unwrap_or(0);
        Ok(rows
            .into_iter()
            .filter(waiting)
            .take(limit)
            .map(|r| r.problem)
            .collect())
    }

    async fn inbox_event(
        &self,
        profile: &str,
        event_id: &str,
    ) -> Result<Option<InboxEvent>, StoreError> {
        let q = select_inbox_by_key();
        let query = sqlx::query_as(&q).bind(profile).bind(event_id);
        let mut row: Option<InboxEvent> = self.fetch(query.fetch_optional(&self.pool)).await?;
        if let (Some(held), Some(e)) = (DB::held_claims(&self.state), row.as_mut())
            && e.event.status == InboxStatus::Pending
            && held.holds(e.id)
        {
            // As a written claim shows it: in hand, its attempt counted.
            e.event.status = InboxStatus::Processing;
            e.attempts += 1;
        }
        Ok(row)
    }
}

/// A row of [`PROBLEMS`]: the problem and its row id.
#[derive(sqlx::FromRow)]
struct ProblemRow {
    id: i64,
    #[sqlx(flatten)]
    problem: InboxProblem,
}

/// A claim held in memory (see `held_claims`): what [`InboxStore::claim_inbox`] was
/// asked.
struct HeldClaim<'a> {
    owner: &'a str,
    now: UnixMs,
    lease_ms: i64,
    limits: ClaimLimits,
    after_chat: Option<&'a str>,
}

impl<DB: Dialect> SqlStore<DB> {
    /// Whether claims are held in memory rather than written (see `held_claims`).
    pub(crate) fn holds_claims(&self) -> bool {
        DB::held_claims(&self.state).is_some()
    }

    /// Lets go of the held claims of `ids`, once their outcome is committed.
    pub(crate) fn let_go(&self, ids: &[i64]) {
        if let Some(held) = DB::held_claims(&self.state) {
            held.release(ids);
        }
    }

    /// [`InboxStore::claim_inbox`] with the claims held in memory: the chats no claim
    /// holds are read as [`lanes`] finds them, and their oldest due rows are read, not
    /// written, on a pooled connection beside the writer; they are held from then on.
    /// The leases that ran out are let go first, their attempt written (their holder
    /// died). A row's outcome is committed before its claim is let go, so a claim never
    /// reads a finished row as due.
    async fn claim_held(
        &self,
        held: &HeldClaims,
        c: HeldClaim<'_>,
    ) -> Result<Vec<InboxEvent>, StoreError> {
        let _claiming = held.claiming.lock().await;
        let expired = held.expire(c.now);
        let busy = held.chats();
        let wanted = usize::try_from(c.limits.chats).unwrap_or(usize::MAX);
        let scan = ClaimLimits {
            chats: c
                .limits
                .chats
                .saturating_add(i64::try_from(busy.len()).unwrap_or(i64::MAX)),
            ..c.limits
        };
        let read = pending_lane();
        let mut rows: Vec<InboxEvent> = self
            .bounded(async {
                // Only a claim that ran out, or one written by a version that wrote its
                // claims, needs a write; a claim itself only reads, beside the writer.
                let mut conn = self.pool.acquire().await?;
                let written: bool = sqlx::query_scalar(WRITTEN_CLAIMS)
                    .fetch_one(&mut *conn)
                    .await?;
                if written || !expired.is_empty() {
                    let mut tx = self.transaction().await?;
                    sqlx::query(EXPIRE).bind(c.now).execute(&mut *tx).await?;
                    count_attempts_within(&mut tx, &expired, None).await?;
                    tx.commit().await?;
                }
                let lanes = free_lanes::<DB>(&mut conn, c.now, scan, c.after_chat).await?;
                let mut rows = Vec::new();
                for chat in lanes.iter().filter(|k| !busy.contains(*k)).take(wanted) {
                    let due: Vec<InboxEvent> = sqlx::query_as(&read)
                        .bind(chat)
                        .bind(c.now)
                        .bind(c.limits.per_chat)
                        .fetch_all(&mut *conn)
                        .await?;
                    rows.extend(due);
                }
                Ok(rows)
            })
            .await?;
        let until = UnixMs(c.now.0.saturating_add(c.lease_ms));
        held.hold(c.owner, until, &mut rows);
        Ok(in_arrival_order(rows))
    }
}

/// Counts the attempt of held claims let go without an outcome (see
/// [`count_attempts`]), `due` at that time if given; how many rows it counted.
async fn count_attempts_within<DB: Dialect>(
    tx: &mut Write<'_, DB>,
    ids: &[i64],
    due: Option<UnixMs>,
) -> Result<u64, StoreError> {
    let mut counted = 0;
    for chunk in ids.chunks(IDS_PER_STATEMENT) {
        let q = count_attempts(chunk.len(), due.is_some());
        let mut query = sqlx::query(&q).persistent(false);
        if let Some(at) = due {
            query = query.bind(at);
        }
        for id in chunk {
            query = query.bind(id);
        }
        counted += DB::rows_affected(&query.execute(&mut **tx).await?);
    }
    Ok(counted)
}

/// The chats a claim takes, at most `limits.chats`: those after `after_chat` first, then
/// from the start (see [`lanes`]).
async fn free_lanes<DB: Dialect>(
    conn: &mut <DB as sqlx::Database>::Connection,
    now: UnixMs,
    limits: ClaimLimits,
    after_chat: Option<&str>,
) -> Result<Vec<String>, StoreError> {
    let wanted = usize::try_from(limits.chats).unwrap_or(usize::MAX);
    let mut chats: Vec<String> = match after_chat {
        Some(after) => {
            sqlx::query_scalar(&lanes(true))
                .bind(now)
                .bind(LANE_SCAN)
                .bind(limits.chats)
                .bind(after)
                .fetch_all(&mut *conn)
                .await?
        }
        None => Vec::new(),
    };
    if chats.len() < wanted {
        let from_start: Vec<String> = sqlx::query_scalar(&lanes(false))
            .bind(now)
            .bind(LANE_SCAN)
            .bind(limits.chats)
            .fetch_all(&mut *conn)
            .await?;
        for chat in from_start {
            if chats.len() < wanted && !chats.contains(&chat) {
                chats.push(chat);
            }
        }
    }
    Ok(chats)
}
