//! The HTTP layer: routes, extractors, errors, OpenAPI. Knows the app state; the
//! protocol, store and context modules know nothing of HTTP.

mod agent_callback;
mod api_doc;
mod asks;
mod attachments;
mod auth;
mod card_callback;
mod digests;
mod error;
mod explain;
mod extract;
mod feed;
mod health;
mod media;
mod metrics;
pub mod openapi;
mod reshape;
mod router;
mod schemas;
mod sessions;
mod status;
mod turn_events;
mod turns;
mod ui;
mod verdicts;
mod webhook;
mod what_if;

pub use auth::{Admin, AdminAuth};
pub use error::{AdminErrors, ApiError, CallbackErrors, ErrorBody, ErrorDetail};
pub use router::router;

pub use crate::state::AppState;

/// The named profile, or the first configured one; `unknown_profile` otherwise.
fn profile_or_first(app: &AppState, profile: Option<String>) -> Result<String, ApiError> {
    match profile {
        Some(p) if app.profiles.contains_key(&p) => Ok(p),
        Some(p) => Err(ApiError::UnknownProfile(p)),
        None => app
            .config
            .profiles
            .first()
            .map(|p| p.name.clone())
            .ok_or_else(|| ApiError::UnknownProfile(String::new())),
    }
}
