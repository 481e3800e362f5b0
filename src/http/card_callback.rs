//! A card press on the event URL or the legacy card URL, answered as HTTP: the press is
//! stored and answered within its budget by [`crate::inbox::press`]; this turns the
//! outcome into the response Feishu shows.

use axum::{
    Json,
    response::{IntoResponse, Response},
};
use tokio::time::Instant;

use super::{ApiError, AppState};
use crate::{
    inbox::press::{Answered, working_on_it},
    store::NewInboxEvent,
};

/// Stores a verified press and answers it by `budget`.
pub(super) async fn receive(
    app: &AppState,
    row: NewInboxEvent,
    budget: Instant,
) -> Result<(&'static str, Response), ApiError> {
    let (profile, event_id) = (row.profile.clone(), row.event_id.clone());
    let answered = app.presses().receive(row, budget).await;
    let label = answered.label();
    match answered {
        Answered::Done(_, body) => Ok((label, Json(body).into_response())),
        Answered::Deferred => Ok((label, Json(working_on_it()).into_response())),
        Answered::NotStored(e) => Err(ApiError::not_stored(e, &app.metrics, &profile, &event_id)),
        Answered::Lost => Err(ApiError::StoreUnavailable(None)),
    }
}
