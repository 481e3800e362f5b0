//! SQL of the [`crate::store::MediaStore`]: media references read from the event log,
//! and the `turn_attachments` rows (one per turn and key, inserted once).

use async_trait::async_trait;

use super::{dialect::Dialect, inbox::IDS_PER_STATEMENT, store::SqlStore};
use crate::{
    store::{AttachmentRow, MediaStore, NewAttachment, StoreError},
    util::UnixMs,
};

const COLUMNS: &str = "turn_id, idem_key, profile, name, kind, size_bytes, resource_key, \
message_id, created_at, sent_at";

const INSERT: &str = "INSERT INTO turn_attachments \
(turn_id, idem_key, profile, name, kind, size_bytes, created_at) \
VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (turn_id, idem_key) DO NOTHING";

const SENT: &str = "UPDATE turn_attachments SET resource_key = $3, message_id = $4, sent_at = $5 \
WHERE turn_id = $1 AND idem_key = $2";

/// The metadata of `n` messages recorded by profile `$1`, not recalled.
fn metadata_among(n: usize) -> String {
    let list = (2..=n + 1)
        .map(|i| format!("${i}"))
        .collect::<Vec<_>>()
        .join(", ");
    format!(
        "SELECT message_id, metadata_json FROM thread_context_events \
         WHERE bot_profile = $1 AND recalled = FALSE AND message_id IN ({list}) ORDER BY id"
    )
}

#[async_trait]
impl<DB: Dialect> MediaStore for SqlStore<DB> {
    async fn media_metadata(
        &self,
        profile: &str,
        message_ids: &[String],
    ) -> Result<Vec<(String, String)>, StoreError> {
        let mut found: Vec<(String, String)> = Vec::new();
        for chunk in message_ids.chunks(IDS_PER_STATEMENT) {
            let q = metadata_among(chunk.len());
            let mut query = sqlx::query_as(&q).persistent(false).bind(profile);
            for id in chunk {
                query = query.bind(id);
            }
            let rows: Vec<(String, String)> = self.fetch(query.fetch_all(&self.pool)).await?;
            for row in rows {
                if !found.iter().any(|(m, _)| *m == row.0) {
                    found.push(row);
                }
            }
        }
        Ok(found)
    }

    async fn begin_attachment(
        &self,
        new: &NewAttachment<'_>,
    ) -> Result<(AttachmentRow, bool), StoreError> {
        let select =
            format!("SELECT {COLUMNS} FROM turn_attachments WHERE turn_id = $1 AND idem_key = $2");
        self.bounded(async {
            let mut tx = self.transaction().await?;
            let done = sqlx::query(INSERT)
                .bind(new.turn_id)
                .bind(new.key)
                .bind(new.profile)
                .bind(new.name)
                .bind(new.kind)
                .bind(new.size_bytes)
                .bind(new.now)
                .execute(&mut *tx)
                .await?;
            let inserted = DB::rows_affected(&done);
            let row: AttachmentRow = sqlx::query_as(&select)
                .bind(new.turn_id)
                .bind(new.key)
                .fetch_one(&mut *tx)
                .await?;
            tx.commit().await?;
            Ok((row, inserted > 0))
        })
        .await
    }

    async fn attachment_sent(
        &self,
        turn_id: &str,
        key: &str,
        (resource_key, message_id): (&str, &str),
        now: UnixMs,
    ) -> Result<(), StoreError> {
        let query = sqlx::query(SENT)
            .bind(turn_id)
            .bind(key)
            .bind(resource_key)
            .bind(message_id)
            .bind(now);
        self.execute(query).await.map(|_| ())
    }

    async fn turn_attachments(&self, turn_id: &str) -> Result<Vec<AttachmentRow>, StoreError> {
        let q = format!(
            "SELECT {COLUMNS} FROM turn_attachments WHERE turn_id = $1 ORDER BY created_at, idem_key"
        );
        self.fetch(sqlx::query_as(&q).bind(turn_id).fetch_all(&self.pool))
            .await
    }
}
