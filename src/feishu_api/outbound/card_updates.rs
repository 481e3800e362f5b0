//! Keeping a posted card current through the Open API: a CardKit entity streams its
//! text into the answer element (or, when more than its text changed, is replaced whole
//! with its streaming mode kept on) and is finished by turning streaming off and
//! replacing the card; a card posted as a message is replaced with PATCH.
//!
//! Two refusals of a real tenant are handled here or below. Feishu closes a card's
//! streaming mode ten minutes after it was turned on (200850; 300309 once it is off):
//! a long answer's next text would be refused from then on, so streaming is turned on
//! again and the text sent once more — the card keeps showing progress however long
//! the turn runs. While a user's press on the card is being answered (200810), every
//! update of it is refused: an intermediate one is skipped (the next carries it all),
//! a final one is retried shortly by the call itself, so a card never stays "running"
//! after its turn ended.

use super::{ANSWER_ELEMENT, CardUpdate, Entity, OutboundError, feishu::FeishuOutbound, pacing};
use crate::feishu_api::{
    FeishuClient, OpenApiError, budget::Urgency, codes::STREAMING_OFF, outbound::PostedCard,
};

impl FeishuOutbound {
    /// Brings `update.card` up to date with `client`.
    pub(super) async fn update_posted(
        client: &FeishuClient,
        update: CardUpdate<'_>,
    ) -> Result<(), OutboundError> {
        let card = update.card;
        let intermediate = update.urgency == Urgency::Intermediate;
        if intermediate && card.pace.quiet() {
            return Err(OutboundError::Api(OpenApiError::Deferred));
        }
        let done = match &card.entity {
            Some(entity) if intermediate && update.whole => {
                // Replaced whole while it streams: the card keeps its streaming mode.
                let mut view = update.view.clone();
                view["config"]["streaming_mode"] = serde_json::json!(true);
                card.pace.wait(pacing::ENTITY_SPACING).await;
                client
                    .replace_card_entity(
                        &entity.card_id,
                        &view,
                        &entity.sequence,
                        Urgency::Intermediate,
                    )
                    .await
            }
            Some(entity) if intermediate => stream(client, card, entity, update.text).await,
            Some(entity) => {
                card.pace.wait(pacing::ENTITY_SPACING).await;
                let off = client
                    .set_streaming(&entity.card_id, false, &entity.sequence, Urgency::Required)
                    .await;
                if let Err(e) = off {
                    tracing::warn!(profile = %update.profile, error = %e, "streaming mode not turned off; replacing the card anyway");
                }
                card.pace.wait(pacing::ENTITY_SPACING).await;
                client
                    .replace_card_entity(
                        &entity.card_id,
                        update.view,
                        &entity.sequence,
                        Urgency::Required,
                    )
                    .await
            }
            None => {
                card.pace.wait(pacing::MESSAGE_SPACING).await;
                client
                    .patch_card(card.message_id(), update.view, update.urgency)
                    .await
            }
        };
        if let Err(OpenApiError::RateLimited { reset, .. }) = &done {
            card.pace.hush(*reset);
        }
        done.map_err(OutboundError::Api)
    }
}

/// Streams `text` into the entity's answer element; when Feishu has closed the card's
/// streaming mode, turns it on again and streams once more.
async fn stream(
    client: &FeishuClient,
    card: &PostedCard,
    entity: &Entity,
    text: &str,
) -> Result<(), OpenApiError> {
    let send = || {
        client.stream_text(
            &entity.card_id,
            ANSWER_ELEMENT,
            text,
            &entity.sequence,
            Urgency::Intermediate,
        )
    };
    card.pace.wait(pacing::ENTITY_SPACING).await;
    match send().await {
        Err(e) if e.is(&STREAMING_OFF) => {
            tracing::info!(card_id = %entity.card_id, code = ?e.code(), "the card's streaming mode was closed (Feishu closes it ten minutes after it was turned on); turning it on again");
            card.pace.wait(pacing::ENTITY_SPACING).await;
            client
                .set_streaming(
                    &entity.card_id,
                    true,
                    &entity.sequence,
                    Urgency::Intermediate,
                )
                .await?;
            card.pace.wait(pacing::ENTITY_SPACING).await;
            send().await
        }
        other => other,
    }
}
