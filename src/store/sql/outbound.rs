//! SQL of the [`crate::store::OutboundStore`]: replies as recorded.

/// Implements [`crate::store::OutboundStore`] for a backend type with `pool` and `timeout`
/// fields (see `sql` for why this is a macro).
macro_rules! impl_outbound_store {
    ($ty:ty) => {
        #[async_trait::async_trait]
        impl $crate::store::OutboundStore for $ty {
            async fn record_outbound(
                &self,
                m: &$crate::store::NewOutbound,
            ) -> Result<i64, $crate::store::StoreError> {
                $crate::store::bounded(self.timeout, async {
                    Ok(sqlx::query_scalar(
                        "INSERT INTO outbound_messages (profile, chat_id, reply_to, kind, text, created_at) \
                         VALUES ($1, $2, $3, $4, $5, $6) RETURNING id",
                    )
                    .bind(&m.profile)
                    .bind(&m.chat_id)
                    .bind(&m.reply_to)
                    .bind(m.kind.as_str())
                    .bind(&m.text)
                    .bind(m.created_at)
                    .fetch_one(&self.pool)
                    .await?)
                })
                .await
            }

            async fn outbound(
                &self,
                profile: &str,
                limit: i64,
            ) -> Result<Vec<$crate::store::OutboundRow>, $crate::store::StoreError> {
                $crate::store::bounded(self.timeout, async {
                    let mut rows: Vec<$crate::store::OutboundRow> = sqlx::query_as(
                        "SELECT id, profile, chat_id, reply_to, kind, text, created_at FROM outbound_messages \
                         WHERE profile = $1 ORDER BY id DESC LIMIT $2",
                    )
                    .bind(profile)
                    .bind(limit)
                    .fetch_all(&self.pool)
                    .await?;
                    rows.reverse();
                    Ok(rows)
                })
                .await
            }
        }
    };
}
pub(crate) use impl_outbound_store;
