//! SQL of the [`crate::store::OutboundStore`]: replies as recorded.

use async_trait::async_trait;

use super::{dialect::Dialect, store::SqlStore};
use crate::store::{NewOutbound, OutboundRow, OutboundStore, StoreError};

const RECORD: &str = "\
INSERT INTO outbound_messages (profile, chat_id, reply_to, kind, text, created_at)
VALUES ($1, $2, $3, $4, $5, $6) RETURNING id";

const NEWEST: &str = "\
SELECT id, profile, chat_id, reply_to, kind, text, created_at FROM outbound_messages
WHERE profile = $1 ORDER BY id DESC LIMIT $2";

#[async_trait]
impl<DB: Dialect> OutboundStore for SqlStore<DB> {
    async fn record_outbound(&self, m: &NewOutbound) -> Result<i64, StoreError> {
        let query = sqlx::query_scalar(RECORD)
            .bind(&m.profile)
            .bind(&m.chat_id)
            .bind(&m.reply_to)
            .bind(m.kind.as_str())
            .bind(&m.text)
            .bind(m.created_at);
        self.fetch(query.fetch_one(&self.pool)).await
    }

    async fn outbound(&self, profile: &str, limit: i64) -> Result<Vec<OutboundRow>, StoreError> {
        let query = sqlx::query_as(NEWEST).bind(profile).bind(limit);
        let mut rows: Vec<OutboundRow> = self.fetch(query.fetch_all(&self.pool)).await?;
        rows.reverse();
        Ok(rows)
    }
}
