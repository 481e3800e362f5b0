//! Reading back what the bridges wrote, straight from the database (SQLite or Postgres,
//! the same queries): the inbox, the routing verdicts, the thread records and the turns.

use std::{
    collections::HashMap,
    time::{Duration, Instant},
};

use sqlx::{
    Connection, FromRow, PgConnection, SqliteConnection, postgres::PgRow, sqlite::SqliteRow,
};

/// Where the bridges' database is.
#[derive(Debug, Clone)]
pub enum Db {
    /// A Postgres URL.
    Pg(String),
    /// A SQLite URL.
    Sqlite(String),
}

/// One turn row.
#[derive(Debug, Clone, FromRow)]
pub struct TurnRow {
    /// `turn_id`.
    pub turn_id: String,
    /// The request message.
    pub message_id: String,
    /// `queued` … `cancelled`.
    pub state: String,
    /// Why it did not succeed.
    pub error: Option<String>,
}

/// Everything the checks read, taken at one moment.
#[derive(Debug, Default)]
pub struct Snapshot {
    /// event_id → (status, attempts).
    pub inbox: HashMap<String, (String, i64)>,
    /// message_id → verdict rows.
    pub verdicts: HashMap<String, i64>,
    /// message_id → thread records of the message itself (`human_message`,
    /// `user_request`).
    pub records: HashMap<String, i64>,
    /// Every turn.
    pub turns: Vec<TurnRow>,
}

/// What is left to do: inbox rows not finished, turns not finished.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Backlog {
    /// Inbox rows `pending` or `processing`.
    pub inbox: i64,
    /// Turns `queued`.
    pub queued: i64,
    /// Turns `running`.
    pub running: i64,
}

impl Backlog {
    /// Nothing left.
    pub fn is_empty(&self) -> bool {
        self.inbox == 0 && self.queued == 0 && self.running == 0
    }
}

impl Db {
    async fn rows<T>(&self, sql: &str) -> Result<Vec<T>, sqlx::Error>
    where
        T: for<'r> FromRow<'r, PgRow> + for<'r> FromRow<'r, SqliteRow> + Send + Unpin,
    {
        match self {
            Self::Pg(url) => {
                let mut c = PgConnection::connect(url).await?;
                let rows = sqlx::query_as::<_, T>(sql).fetch_all(&mut c).await;
                c.close().await.ok();
                rows
            }
            Self::Sqlite(url) => {
                let mut c = SqliteConnection::connect(url).await?;
                let rows = sqlx::query_as::<_, T>(sql).fetch_all(&mut c).await;
                c.close().await.ok();
                rows
            }
        }
    }

    /// Reads everything the checks need.
    pub async fn snapshot(&self) -> Result<Snapshot, sqlx::Error> {
        let inbox: Vec<(String, String, i64)> = self
            .rows("SELECT event_id, status, attempts FROM inbox_events")
            .await?;
        let verdicts: Vec<(String, i64)> = self
            .rows("SELECT message_id, COUNT(*) FROM routing_verdicts GROUP BY message_id")
            .await?;
        let records: Vec<(String, i64)> = self
            .rows(
                "SELECT message_id, COUNT(*) FROM thread_context_events \
                 WHERE event_type IN ('human_message', 'user_request') GROUP BY message_id",
            )
            .await?;
        let turns: Vec<TurnRow> = self
            .rows("SELECT turn_id, message_id, state, error FROM turns ORDER BY id")
            .await?;
        Ok(Snapshot {
            inbox: inbox
                .into_iter()
                .map(|(id, status, attempts)| (id, (status, attempts)))
                .collect(),
            verdicts: verdicts.into_iter().collect(),
            records: records.into_iter().collect(),
            turns,
        })
    }

    /// What is left to do.
    pub async fn backlog(&self) -> Result<Backlog, sqlx::Error> {
        let inbox: Vec<(i64,)> = self
            .rows("SELECT COUNT(*) FROM inbox_events WHERE status IN ('pending', 'processing')")
            .await?;
        let turns: Vec<(String, i64)> = self
            .rows(
                "SELECT state, COUNT(*) FROM turns WHERE state IN ('queued', 'running') \
                 GROUP BY state",
            )
            .await?;
        let of = |s: &str| {
            turns
                .iter()
                .find(|(state, _)| state == s)
                .map_or(0, |(_, n)| *n)
        };
        Ok(Backlog {
            inbox: inbox.first().map_or(0, |r| r.0),
            queued: of("queued"),
            running: of("running"),
        })
    }

    /// The unfinished turns as `turn_id state owner` (the owner where the schema keeps
    /// one: multi-replica turn leases).
    pub async fn unfinished_turns(&self) -> Result<Vec<String>, sqlx::Error> {
        let with_owner: Result<Vec<(String, String, Option<String>)>, _> = self
            .rows(
                "SELECT turn_id, state, lease_owner FROM turns \
                 WHERE state IN ('queued', 'running') ORDER BY id",
            )
            .await;
        let rows = match with_owner {
            Ok(rows) => rows,
            Err(_) => self
                .rows::<(String, String)>(
                    "SELECT turn_id, state FROM turns WHERE state IN ('queued', 'running') \
                     ORDER BY id",
                )
                .await?
                .into_iter()
                .map(|(id, state)| (id, state, None))
                .collect(),
        };
        Ok(rows
            .into_iter()
            .map(|(id, state, owner)| format!("{id} {state} {}", owner.unwrap_or_default()))
            .collect())
    }

    /// Polls until nothing is left to do or `limit` passes; the last backlog seen (an
    /// unreadable database counts as work left) and how long it took.
    pub async fn drained(&self, limit: Duration) -> (Backlog, Duration) {
        let begun = Instant::now();
        let mut last = Backlog {
            inbox: -1,
            ..Backlog::default()
        };
        while begun.elapsed() < limit {
            if let Ok(b) = self.backlog().await {
                last = b;
                if b.is_empty() {
                    break;
                }
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        (last, begun.elapsed())
    }
}
