//! SQL of the [`crate::store::NamesStore`]: one row per (profile, kind, id).

use async_trait::async_trait;

use super::{dialect::Dialect, store::SqlStore};
use crate::{
    store::{CachedName, NameKind, NamesStore, StoreError},
    util::UnixMs,
};

/// Ids read at once (well under either backend's limit on bound values).
const CHUNK: usize = 200;

/// `SELECT` of the cached rows of `n` ids of profile `$1` and kind `$2`.
fn cached_among(n: usize) -> String {
    let list = (3..=n + 2)
        .map(|i| format!("${i}"))
        .collect::<Vec<_>>()
        .join(", ");
    format!(
        "SELECT id, name, fetched_at FROM directory_names \
         WHERE profile = $1 AND kind = $2 AND id IN ({list})"
    )
}

const PUT: &str = "\
INSERT INTO directory_names (profile, kind, id, name, fetched_at) VALUES ($1, $2, $3, $4, $5)
ON CONFLICT (profile, kind, id) DO UPDATE SET name = excluded.name, fetched_at = excluded.fetched_at";

const COUNTS: &str = "\
SELECT profile, COUNT(*) FROM directory_names WHERE name IS NOT NULL GROUP BY profile ORDER BY profile";

#[async_trait]
impl<DB: Dialect> NamesStore for SqlStore<DB> {
    async fn cached_names(
        &self,
        profile: &str,
        kind: NameKind,
        ids: &[String],
    ) -> Result<Vec<CachedName>, StoreError> {
        let mut out = Vec::new();
        for chunk in ids.chunks(CHUNK) {
            let sql = cached_among(chunk.len());
            let mut query = sqlx::query_as::<_, (String, Option<String>, i64)>(&sql)
                .bind(profile)
                .bind(kind.as_str());
            for id in chunk {
                query = query.bind(id);
            }
            let rows = self.fetch(query.fetch_all(&self.pool)).await?;
            out.extend(rows.into_iter().map(|(id, name, at)| CachedName {
                profile: profile.to_string(),
                kind,
                id,
                name,
                fetched_at: UnixMs(at),
            }));
        }
        Ok(out)
    }

    async fn put_names(&self, names: &[CachedName]) -> Result<(), StoreError> {
        if names.is_empty() {
            return Ok(());
        }
        self.bounded(async {
            let mut tx = self.transaction().await?;
            for n in names {
                sqlx::query(PUT)
                    .bind(&n.profile)
                    .bind(n.kind.as_str())
                    .bind(&n.id)
                    .bind(&n.name)
                    .bind(n.fetched_at.0)
                    .execute(&mut *tx)
                    .await?;
            }
            tx.commit().await
        })
        .await
    }

    async fn names_counts(&self) -> Result<Vec<(String, i64)>, StoreError> {
        let query = sqlx::query_as::<_, (String, i64)>(COUNTS);
        self.fetch(query.fetch_all(&self.pool)).await
    }
}
