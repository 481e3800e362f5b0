//! The HTTP layer: routes, extractors, errors, OpenAPI. Knows the app state; the
//! protocol, store and context modules know nothing of HTTP.

mod auth;
mod error;
mod health;
mod metrics;
pub mod openapi;
mod router;
mod status;
mod webhook;

pub use auth::AdminAuth;
pub use error::{ApiError, ErrorBody, ErrorDetail};
pub use router::router;

pub use crate::app::AppState;
