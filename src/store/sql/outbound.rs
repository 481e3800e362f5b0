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
                $crate::store::sql::fetch!(
                    self, query_scalar, fetch_one,
                    "INSERT INTO outbound_messages (profile, chat_id, reply_to, kind, text, created_at) \
                     VALUES ($1, $2, $3, $4, $5, $6) RETURNING id",
                    &m.profile, &m.chat_id, &m.reply_to, m.kind.as_str(), &m.text, m.created_at,
                )
            }

            async fn outbound(
                &self,
                profile: &str,
                limit: i64,
            ) -> Result<Vec<$crate::store::OutboundRow>, $crate::store::StoreError> {
                let mut rows: Vec<$crate::store::OutboundRow> = $crate::store::sql::fetch!(
                    self, query_as, fetch_all,
                    "SELECT id, profile, chat_id, reply_to, kind, text, created_at FROM outbound_messages \
                     WHERE profile = $1 ORDER BY id DESC LIMIT $2",
                    profile, limit,
                )?;
                rows.reverse();
                Ok(rows)
            }
        }
    };
}
pub(crate) use impl_outbound_store;
